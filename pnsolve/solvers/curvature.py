"""Negative curvature or rounding: how the belief update reads ``Cᵀ A C`` under the inverse prior.

A new direction ``C`` (the action after Gram–Schmidt against the observed directions)
has curvature ``Cᵀ A C > 0`` for SPD ``A``. Computed, it carries two kinds of error:

* rounding of the product: ``A s`` is accurate to about ``√n·eps·‖A‖‖s‖`` whatever
  ``‖A s‖`` is, so a curvature within ``c·eps·‖A‖‖s‖²`` (``c = 10 √n``,
  :data:`~pnsolve.krylov.breakdown.CURVATURE_BAND`) is rounding
  (:func:`curvature_floor`), larger than the action-relative band when ``‖A s‖ ≪
  ‖A‖‖s‖`` (near-null directions of a singular or ill-conditioned ``A``);
* the error of recursive images ``A C = A s − AV (Vᵀ A s)``, which inherit every
  inaccuracy of the stored images ``AV`` (replayed Krylov buffers, whose images were
  recycled from earlier operators, are the usual source). A clearly negative value is
  therefore confirmed with one fresh product before ``A`` is declared not positive
  definite (:meth:`~pnsolve.solvers.conditioning.Conditioner._basis`).

Within the floor, or not confirmed, the direction is dependent: dropped, and a
breakdown if nothing else is left.
"""

from __future__ import annotations

import torch

from .._core.errors import MissingStructureError, NotPositiveDefiniteError
from ..krylov.breakdown import CURVATURE_BAND
from ..linops.base import LinearOperator

__all__ = ["curvature_floor", "equilibrated_curvature", "norm_estimate", "not_positive_definite"]


def curvature_floor(
    C: torch.Tensor, d: torch.Tensor, band: float, norm_A: float, sqrt_n: float, eps: float
) -> float:
    """Attainable accuracy of the eigenvalues of the equilibrated ``(C D)ᵀ A (C D)``.

    Parameters
    ----------
    C
        The new directions, shape ``(n, m)``.
    d
        The equilibration ``D = diag(d)``, shape ``(m,)`` (or ``(1,)`` for none).
    band
        The action-relative band (``10 √n·eps`` per column).
    norm_A
        An estimate of ``‖A‖`` (the largest ``‖A s‖/‖s‖`` seen, ``max |diag A|``).
    sqrt_n, eps
        ``√n`` and the dtype's machine epsilon.

    Returns
    -------
    float
        ``max(band, c·eps·‖A‖‖C D‖²_F)``: curvature above ``−floor`` is rounding.
    """
    size = float((C * d[None, :]).square().sum())
    return max(band, CURVATURE_BAND * sqrt_n * eps * norm_A * size)


def equilibrated_curvature(C: torch.Tensor, AC: torch.Tensor, d: torch.Tensor) -> float:
    """Smallest eigenvalue of ``D Cᵀ (A C) D`` (symmetrised), a float."""
    G = C.mT @ AC
    Gs = 0.5 * (G + G.mT) * d[:, None] * d[None, :]
    return float(torch.linalg.eigvalsh(Gs)[0] if Gs.shape[0] > 1 else Gs[0, 0])


def not_positive_definite(
    lam: float, d: torch.Tensor, iteration: int, fresh: bool = False
) -> NotPositiveDefiniteError:
    """The error for the equilibrated curvature ``lam`` of the action at ``iteration``."""
    how = " (confirmed with a fresh product A s)" if fresh else ""
    return NotPositiveDefiniteError(
        f"A is not positive definite: the action at iteration {iteration} (0-based) "
        f"has negative curvature {lam / float(d.max()) ** 2:.3e}{how}",
        iteration=iteration,
    )


def norm_estimate(A: LinearOperator) -> float:
    """``max |diag A|`` where the diagonal is structured (≥ ‖A‖/n for SPD ``A``), else 0."""
    try:
        return float(A.diagonal().abs().max())
    except MissingStructureError:
        return 0.0
