"""Argument checks shared by the preconditioners."""

from __future__ import annotations

import numpy as np

from ..linops.base import LinearOperator
from ..linops.conversion import as_linop

__all__ = ["as_spd_operator", "check_rank"]


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
