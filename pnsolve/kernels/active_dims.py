"""``active_dims=``: a kernel that reads only some input columns."""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["check_active_dims", "minimum_dims", "select_dims"]


def check_active_dims(active_dims: object) -> tuple[int, ...] | None:
    """Validate ``active_dims``: ``None`` (every column) or distinct non-negative ints.

    Raises
    ------
    ValueError
        For an empty, negative, repeated or non-integer entry, naming ``active_dims``.
    """
    if active_dims is None:
        return None
    if isinstance(active_dims, int) and not isinstance(active_dims, bool):
        active_dims = (active_dims,)
    if isinstance(active_dims, torch.Tensor):
        active_dims = active_dims.tolist()
    if not isinstance(active_dims, Sequence) or isinstance(active_dims, str):
        raise ValueError(f"active_dims must be a sequence of column indices, got {active_dims!r}")
    dims = tuple(active_dims)
    if not dims or any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in dims):
        raise ValueError(
            f"active_dims must be non-empty non-negative column indices, got {active_dims!r}"
        )
    if len(set(dims)) != len(dims):
        raise ValueError(f"active_dims must not repeat a column, got {active_dims!r}")
    return dims


def minimum_dims(active_dims: tuple[int, ...] | None) -> int:
    """The fewest input columns ``active_dims`` needs (0 for ``None``)."""
    return 0 if active_dims is None else max(active_dims) + 1


def select_dims(X: torch.Tensor, active_dims: tuple[int, ...] | None) -> torch.Tensor:
    """The columns ``active_dims`` of ``X`` ``(n, d)`` (``X`` itself for ``None``)."""
    if active_dims is None:
        return X
    if active_dims == tuple(range(active_dims[0], active_dims[-1] + 1)):
        return X[:, active_dims[0] : active_dims[-1] + 1]
    return X[:, list(active_dims)]
