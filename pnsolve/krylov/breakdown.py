"""Breakdown checks shared by the CG iterations (``pn.cg`` and ULISSE's truncated CG)."""

from __future__ import annotations

import math

import torch

from .._core.errors import NotPositiveDefiniteError
from ..linops.base import LinearOperator

__all__ = ["check_preconditioner", "curvature_failure"]


def curvature_failure(
    pAp: torch.Tensor, P: torch.Tensor, AP: torch.Tensor, it: int, idx: torch.Tensor
) -> torch.Tensor:
    """Handle ``pᵀAp ≤ 0`` or non-finite: raise, or return the rounding-level columns.

    ``pᵀAp`` of an SPD matrix computed in floating point is accurate to about
    ``√n·eps·‖p‖‖Ap‖``; curvature within that band is rounding (no progress possible,
    the column is frozen as broken down), clearly negative curvature means ``A`` is
    not positive definite.
    """
    if not bool(torch.isfinite(pAp).all()):
        raise ValueError(
            f"the product A @ p at iteration {it} (0-based) produced NaN or Inf values; "
            "check the operator A"
        )
    scale = torch.linalg.vector_norm(P, dim=0) * torch.linalg.vector_norm(AP, dim=0)
    band = 10.0 * math.sqrt(P.shape[0]) * torch.finfo(P.dtype).eps * scale
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


def check_preconditioner(M: LinearOperator | None, rz: torch.Tensor, it: int) -> None:
    """Raise when ``rᵀ M r ≤ 0`` for some column: ``M`` is not positive definite."""
    if M is not None and not bool((rz > 0).all()):
        raise NotPositiveDefiniteError(
            f"M is not positive definite: rᵀ M r ≤ 0 at iteration {it} (0-based)", iteration=it
        )
