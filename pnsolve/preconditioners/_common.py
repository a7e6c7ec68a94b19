"""Argument checks shared by the preconditioners."""

from __future__ import annotations

import numpy as np
import torch

from .._core.validation import check_finite
from ..linops.base import LinearOperator
from ..linops.conversion import as_linop

__all__ = ["as_spd_operator", "check_rank", "positive_diagonal"]


def as_spd_operator(A: object, name: str = "A") -> LinearOperator:
    """Wrap ``A`` with :func:`as_linop`; require a square operator."""
    op = as_linop(A)
    if not op.is_square:
        raise ValueError(f"{name} must be square, got shape {op.shape}")
    return op


def check_rank(rank: object, n: int, name: str = "rank") -> int:
    """Require an int ``rank ≥ 1``; return ``min(rank, n)``.

    pnsolve's one rule for rank-like arguments (preconditioners, Lanczos steps, LOVE
    caches, buffer compression): a rank above ``n`` is capped at ``n``, the full-rank
    (exact) result, as a Krylov or pivot sequence ends there anyway.
    """
    if isinstance(rank, bool) or not isinstance(rank, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(rank).__name__}")
    if rank < 1:
        raise ValueError(f"{name} must be at least 1, got {rank}")
    return min(int(rank), n)


def positive_diagonal(A: LinearOperator, why: str) -> torch.Tensor:
    """``diag(A)``, detached, required finite and positive (``why`` ends the error)."""
    d = check_finite(A.diagonal().detach(), "the diagonal of A")
    if not bool((d > 0).all()):
        i = int((d <= 0).nonzero()[0, 0])
        raise ValueError(
            f"A has a non-positive diagonal entry A[{i}, {i}] = {float(d[i]):.3e}; {why}"
        )
    return d
