"""The typed record returned by :func:`pnsolve.cg`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.info import IterationInfo

__all__ = ["CGInfo"]


@dataclass(frozen=True, kw_only=True)
class CGInfo(IterationInfo):
    """What a run of :func:`pnsolve.cg` did.

    Shapes below are for a right-hand side ``b`` of shape ``(n, k)``; for ``b`` of
    shape ``(n,)`` the column dimension is dropped, exactly as for ``x``
    (``residual_norms`` has shape ``(iterations + 1,)``, ``converged`` is a 0-d tensor).

    Attributes
    ----------
    iterations
        Number of CG iterations run (the most any column ran).
    products
        Number of product calls with ``A``. Each call multiplies the block of
        still-active columns. Exactly
        ``(1 if x0 is given) + iterations + true_residual_checks``.
    matvecs
        Number of columns multiplied with ``A`` over all product calls.
    true_residual_checks
        Number of extra product calls that recomputed the true residual
        ``b − A x`` (before claiming convergence, for periodic residual
        replacement in low precision, and once at exit for columns that did not
        converge).
    residual_norms
        ``‖r_j‖`` after each iteration, shape ``(iterations + 1, k)``; row 0 is the
        initial residual. At iterations where the true residual was recomputed the
        row holds the true residual. A frozen (stopped) column repeats its final
        value.
    true_residual_norms
        ``‖b_j − A x_j‖`` at exit, computed from the returned ``x``, shape ``(k,)``.
    tolerances
        Per-column thresholds ``max(rtol·‖b_j‖, atol)``, shape ``(k,)``.
    column_iterations
        Iteration at which each column stopped (or the total for active columns),
        integer tensor of shape ``(k,)``.
    converged
        Whether each column met its tolerance (on the true residual), bool, shape ``(k,)``.
    stop_reason
        Why the run ended: ``CONVERGED`` (all columns), ``ZERO_RHS`` (``b = 0``),
        ``MAX_ITERATIONS``, ``CALLBACK`` or ``BREAKDOWN`` (a search direction with
        zero curvature at rounding level, i.e. no further progress possible).
    """

    matvecs: int
    true_residual_checks: int
    true_residual_norms: torch.Tensor
    tolerances: torch.Tensor
    column_iterations: torch.Tensor
    converged: torch.Tensor

    @property
    def success(self) -> bool:
        """Whether every column converged (``b = 0`` counts as converged)."""
        return bool(self.converged.all())
