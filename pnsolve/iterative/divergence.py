"""Divergence of affine sweeps: the residual watch and the error it raises.

A *convergent* affine method keeps every residual column within a known factor of its
initial norm (its :attr:`~pnsolve.iterative.affine.Sweeper.growth_bound`):

* Richardson and Chebyshev: ``r_m = p(A) r₀`` with ``|p| ≤ 1`` on the spectrum, so the
  residual never grows (bound 1);
* Jacobi: ``r_m = D^{1/2} p(D^{-1/2} A D^{-1/2}) D^{-1/2} r₀``, bound
  ``√(max dᵢ / min dᵢ)`` (1 on a kernel matrix);
* Gauss–Seidel and cyclic projections: the error's ``A``-norm never grows, so
  ``‖r_m‖ ≤ √κ(A) ‖r₀‖``; ``κ(A)`` is not known cheaply, but any ``A`` that is
  positive definite in working precision has ``κ(A) < 1/eps``, so the bound is
  ``1/√eps``.

Once a column's residual exceeds :data:`DIVERGENCE_FACTOR` times that bound times its
initial norm (or stops being finite) the method diverges: its mean would be of the
size of the residual, and the belief, calibrated in exact arithmetic, is then lost to
rounding. The sweeps stop there with an error that names the setting to change.
"""

from __future__ import annotations

from typing import Protocol

import torch

__all__ = ["DIVERGENCE_FACTOR", "DivergenceError", "ResidualWatch"]

#: Headroom over a method's growth bound before its sweeps are declared divergent (the
#: bounds are worst cases of exact arithmetic; the factor absorbs rounding and slightly
#: optimistic spectral estimates, and is reached within a few sweeps by a divergent run).
DIVERGENCE_FACTOR = 10.0


class DivergenceError(ValueError, ArithmeticError):
    """An affine method's residual grew past what a convergent run allows.

    A ``ValueError`` (a setting of the method does not fit ``A``; the message names it
    and the value to use) and an ``ArithmeticError`` (what a non-finite residual raised
    before divergence was detected).
    """


class Diverging(Protocol):
    """What a sweeper tells the watch: its growth bound and the error to raise."""

    growth_bound: float

    def diverged(self, sweep: int, start: float, now: float) -> Exception:
        """The error for column residual ``start → now`` at ``sweep`` (1-based)."""
        ...


class ResidualWatch:
    """Checks the residual columns of one run of sweeps after every sweep.

    Parameters
    ----------
    R
        The initial residuals, shape ``(n, k)``.
    sweeper
        The method's sweeps (its growth bound and its error).
    """

    def __init__(self, R: torch.Tensor, sweeper: Diverging) -> None:
        self.sweeper = sweeper
        self.start = torch.linalg.vector_norm(R, dim=0)
        self.limit = (DIVERGENCE_FACTOR * sweeper.growth_bound) * self.start

    def check(self, R: torch.Tensor, sweep: int) -> float:
        """``‖R[:, 0]‖`` after ``sweep`` (1-based); raises once a column diverged.

        One host read per call (the norm and the verdict together).
        """
        norms = torch.linalg.vector_norm(R, dim=0)
        fine = (norms <= self.limit).all()  # NaN and Inf fail too
        first, ok = torch.stack([norms[0], fine.to(norms.dtype)]).tolist()
        if not ok:
            ratio = norms / torch.where(self.start > 0, self.start, 1.0)
            ratio = torch.where(torch.isnan(ratio), torch.inf, ratio)
            j = int(ratio.argmax())
            raise self.sweeper.diverged(sweep, float(self.start[j]), float(norms[j]))
        return first


def growth_text(start: float, now: float, sweep: int) -> str:
    """``the residual grew from … to … in sweep k`` for the error messages."""
    return f"the residual grew from {start:.3g} to {now:.3g} in sweep {sweep}"
