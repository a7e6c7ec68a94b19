"""The working set of the CG iterations and its safeguards.

Breakdown checks (shared by ``pn.cg`` and ULISSE's truncated CG), the residual
replacement of ``pn.cg`` and the direction update of its loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .._core.errors import MissingStructureError, NotPositiveDefiniteError
from ..linops.base import LinearOperator

if TYPE_CHECKING:
    from .cg_info import ProductCount

__all__ = [
    "CURVATURE_BAND",
    "RELIABLE_UPDATE_FACTOR",
    "ActiveColumns",
    "check_preconditioner",
    "curvature_failure",
    "next_direction",
    "not_pd_preconditioner",
    "operator_norm_estimate",
    "replace_residuals",
    "replacement_check",
]

#: Periodic ("reliable update") replacement factor: in low precision the recursive
#: residual of a column is replaced by the true one whenever it has dropped by this
#: factor since the last replacement.
RELIABLE_UPDATE_FACTOR = 1e-2

#: ``c / √n`` in the band ``|pᵀAp| ≤ c·eps·‖A‖‖p‖²`` within which a curvature is
#: rounding, not evidence of an indefinite ``A``: a product ``A p`` is accurate to about
#: ``√n·eps·‖A‖‖p‖``; 10 is the safety factor (the probabilistic ``√n`` of accumulated
#: rounding is exceeded by a few units in practice).
CURVATURE_BAND = 10.0


@dataclass
class ActiveColumns:
    """The compacted working set of still-active columns (private to one run).

    ``X`` aliases the returned solution while every column is active; after the first column
    stops, the working set holds copies and frozen columns are written back once.
    """

    idx: torch.Tensor  # (ka,) indices into the full block
    X: torch.Tensor  # (n, ka) iterates
    B: torch.Tensor  # (n, ka) right-hand sides
    R: torch.Tensor  # (n, ka) residuals
    P: torch.Tensor  # (n, ka) search directions
    tol: torch.Tensor  # (ka,) thresholds
    rz: torch.Tensor  # (ka,) rᵀ M r
    rmax: torch.Tensor  # (ka,) largest ‖r‖ since the last replacement
    best: torch.Tensor  # (ka,) smallest true residual of a failed convergence claim
    stalls: torch.Tensor  # (ka,) consecutive failed claims without halving ``best``
    aliased: bool
    #: A deferred ``rᵀ M r ≤ 0`` test (0-d bool tensor) of the direction update at
    #: iteration ``pending_it``, read with the next iteration's one host synchronisation.
    pending: torch.Tensor | None = None
    pending_it: int = 0

    def resolve_pending(self, bad: bool | None = None) -> None:
        """Raise if the deferred preconditioner test failed (``bad``: its value, if read)."""
        if self.pending is None:
            return
        bad = bool(self.pending) if bad is None else bad
        it, self.pending = self.pending_it, None
        if bad:
            raise not_pd_preconditioner(it)

    def keep(self, mask: torch.Tensor) -> None:
        """Drop the columns where ``mask`` is False."""
        for name in ("X", "B", "R", "P"):
            setattr(self, name, getattr(self, name)[:, mask])
        for name in ("idx", "tol", "rz", "rmax", "best", "stalls"):
            setattr(self, name, getattr(self, name)[mask])
        self.aliased = False


def curvature_failure(
    pAp: torch.Tensor,
    P: torch.Tensor,
    AP: torch.Tensor,
    it: int,
    idx: torch.Tensor,
    A: LinearOperator | None = None,
    eps: float | None = None,
) -> torch.Tensor:
    """Handle ``pᵀAp ≤ 0`` or non-finite: raise, or return the rounding-level columns.

    A product ``A p`` computed in floating point is accurate to about
    ``√n·eps·‖A‖‖p‖`` (whatever ``‖A p‖`` is), so ``pᵀAp`` is known to about
    ``c·eps·‖A‖‖p‖²`` with ``c = 10 √n`` (:data:`CURVATURE_BAND` ``· √n``). Curvature
    within that band is rounding (no progress possible, the column is frozen as broken
    down: a singular or numerically singular ``A`` along ``p``); clearly negative
    curvature means ``A`` is not positive definite. ``‖A‖`` is estimated from below
    (:func:`operator_norm_estimate`: ``max |diag A|`` when ``A`` is given and has a
    structured diagonal, and the largest ``‖A p_j‖/‖p_j‖`` of the block), so the band
    only errs towards raising. ``eps`` is the unit roundoff of the products (default
    ``P``'s dtype; float32's for mixed-precision products).
    """
    if not bool(torch.isfinite(pAp).all()):
        raise ValueError(
            f"the product A @ p at iteration {it} (0-based) produced NaN or Inf values; "
            "check the operator A"
        )
    p_norm = torch.linalg.vector_norm(P, dim=0)
    norm_A = operator_norm_estimate(A, P, AP)
    scale = p_norm * torch.maximum(torch.linalg.vector_norm(AP, dim=0), norm_A * p_norm)
    eps = torch.finfo(P.dtype).eps if eps is None else eps
    band = CURVATURE_BAND * math.sqrt(P.shape[0]) * eps * scale
    nonpos = pAp <= 0
    negative = nonpos & (pAp < -band)
    if bool(negative.any()):
        j = int(negative.nonzero()[0, 0])
        raise NotPositiveDefiniteError(
            f"A is not positive definite: negative curvature pᵀAp = {float(pAp[j]):.3e} "
            f"at iteration {it} (0-based), column {int(idx[j])}",
            iteration=it,
        )
    return nonpos


def operator_norm_estimate(
    A: LinearOperator | None, P: torch.Tensor, AP: torch.Tensor
) -> torch.Tensor:
    """A lower estimate of ``‖A‖`` (0-d): ``max |diag A|`` and the largest ``‖A p_j‖/‖p_j‖``.

    The diagonal is used where ``A`` is given and has a structured one (for SPD ``A``,
    ``max |a_ii| ≥ ‖A‖/n``); no product with ``A``.
    """
    p_norm = torch.linalg.vector_norm(P, dim=0)
    ratio = torch.linalg.vector_norm(AP, dim=0) / torch.where(p_norm > 0, p_norm, 1.0)
    estimate = ratio.max() if ratio.numel() else P.new_zeros(())
    if A is not None:
        try:
            estimate = torch.maximum(estimate, A.diagonal().abs().max().to(estimate.dtype))
        except MissingStructureError:
            pass
    return estimate


def not_pd_preconditioner(it: int) -> NotPositiveDefiniteError:
    """The error for ``rᵀ M r ≤ 0`` at iteration ``it``."""
    return NotPositiveDefiniteError(
        f"M is not positive definite: rᵀ M r ≤ 0 or not finite at iteration {it} (0-based)",
        iteration=it,
    )


def check_preconditioner(M: LinearOperator | None, rz: torch.Tensor, it: int) -> None:
    """Raise when ``rᵀ M r ≤ 0`` for some column: ``M`` is not positive definite."""
    if M is not None and not bool((rz > 0).all()):  # NaN fails too
        raise not_pd_preconditioner(it)


def replacement_check(cols: ActiveColumns, rn: torch.Tensor, factor: float | None) -> torch.Tensor:
    """Columns whose true residual is recomputed now, shape ``(ka,)``, bool.

    Convergence claims, and in low precision (``factor`` given, e.g.
    :data:`RELIABLE_UPDATE_FACTOR`) the columns whose residual dropped by ``factor``
    since the last replacement. No host synchronisation.
    """
    claims = rn <= cols.tol
    return claims if factor is None else claims | (rn <= factor * cols.rmax)


def replace_residuals(
    A: LinearOperator,
    cols: ActiveColumns,
    rn: torch.Tensor,
    check: torch.Tensor,
    any_check: bool,
    count: ProductCount,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Recompute true residuals where ``check``; update ``cols.R`` and ``rn`` in place.

    ``check`` comes from :func:`replacement_check`, ``any_check`` is ``bool(check.any())``
    as the caller read it (with its other flags, in one host synchronisation).

    Returns ``(restart, stuck)`` masks: columns whose residual was replaced and did
    not meet the tolerance (their direction restarts) and columns whose true residual
    stagnated (three replacements in a row without halving the best true residual).
    """
    if not any_check:
        torch.maximum(cols.rmax, rn, out=cols.rmax)
        return check, check  # all False
    c = check.nonzero().squeeze(1)
    Rt = cols.B[:, c] - count(A, cols.X[:, c], check=True)
    cols.R[:, c] = Rt
    rn[c] = torch.linalg.vector_norm(Rt, dim=0)
    cols.rmax[c] = rn[c]
    torch.maximum(cols.rmax, rn, out=cols.rmax)
    restart = check & (rn > cols.tol)
    improved = rn < 0.5 * cols.best
    cols.stalls = torch.where(restart, torch.where(improved, 0, cols.stalls + 1), cols.stalls)
    cols.best = torch.where(restart, torch.minimum(cols.best, rn), cols.best)
    return restart, cols.stalls >= 3


def next_direction(
    cols: ActiveColumns,
    M: LinearOperator | None,
    restart: torch.Tensor,
    it: int,
    checked: torch.Tensor | None = None,
) -> torch.Tensor:
    """``z = M r``, ``p ← z + β p`` (``β = 0`` where ``restart``), ``rz ← rᵀz``; returns ``β``.

    ``rz > 0`` (false for NaN) is tested on the columns ``checked`` (default all) without a host
    synchronisation: the test is left in ``cols.pending`` for the caller's next read
    (:meth:`ActiveColumns.resolve_pending`).
    """
    Z = cols.R if M is None else M.matmat(cols.R)
    rz = torch.linalg.vecdot(cols.R, Z, dim=0)
    if M is not None:
        bad = ~(rz > 0)  # NaN (from M) fails too
        bad = bad if checked is None else bad & checked
        cols.pending, cols.pending_it = bad.any(), it
    beta = torch.where(restart, 0.0, rz / cols.rz)
    cols.P.mul_(beta).add_(Z)
    cols.rz = rz
    return beta
