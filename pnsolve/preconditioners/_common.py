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
    """Require an int ``1 ≤ rank ≤ n``."""
    if isinstance(rank, bool) or not isinstance(rank, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(rank).__name__}")
    if not 1 <= rank <= n:
        raise ValueError(f"{name} must satisfy 1 ≤ {name} ≤ n = {n}, got {rank}")
    return int(rank)
