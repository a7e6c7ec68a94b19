"""Checks and defaults of a SKI grid's configuration (size, bounds, dimension)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, cast

import torch

__all__ = ["DATA_MARGIN", "MAX_GRID_DIMS", "MAX_GRID_POINTS"]

#: Most input dimensions a grid is built for: each point interpolates from ``4ᵈ`` grid
#: points and the grid has ``grid_sizeᵈ`` of them.
MAX_GRID_DIMS = 5
#: Most grid points ``m`` (vectors on the grid are ``m`` long; FFT buffers ``2ᵈ m``).
MAX_GRID_POINTS = 2**25
#: Margin added on each side of the data's range when the bounds come from the data,
#: as a fraction of the range.
DATA_MARGIN = 0.05


def _check_grid_size(grid_size: object) -> tuple[int, ...]:
    if isinstance(grid_size, bool):
        raise TypeError(f"grid_size must be an int or a sequence of ints, got {grid_size!r}")
    sizes = (grid_size,) if isinstance(grid_size, int) else grid_size
    if (
        not isinstance(sizes, Sequence)
        or not sizes
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes)
    ):
        raise TypeError(f"grid_size must be an int or a sequence of ints, got {grid_size!r}")
    if any(s < 4 for s in sizes):
        raise ValueError(
            f"grid_size must be at least 4 per dimension (cubic interpolation uses 4 grid "
            f"points per dimension), got {grid_size!r}"
        )
    return tuple(int(s) for s in sizes)


def _check_bounds(bounds: object) -> list[tuple[float, float]]:
    try:
        pairs = [(float(lo), float(hi)) for lo, hi in cast(Iterable[Any], bounds)]
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"grid_bounds must be a sequence of (lo, hi) pairs, one per dimension: {err}"
        ) from None
    if not pairs:
        raise ValueError("grid_bounds must hold one (lo, hi) pair per input dimension")
    for j, (lo, hi) in enumerate(pairs):
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"grid_bounds[{j}] must be finite with lo < hi, got {(lo, hi)}")
    return pairs


def _check_dim(d: int, sizes: tuple[int, ...]) -> None:
    if d > MAX_GRID_DIMS:
        raise ValueError(
            f"GridInterpolation supports at most {MAX_GRID_DIMS} input dimensions, got d = {d}: "
            f"each point interpolates from 4^d = {4**d} grid points and the grid has "
            f"{math.prod(sizes) if len(sizes) == d else sizes[0] ** d:.3g} points. Above "
            "a few dimensions use the matrix-free base kernel (IterGP, KernelMatrix) instead."
        )
    m = math.prod(sizes)
    if m > MAX_GRID_POINTS:
        raise ValueError(
            f"the grid has {m:.3g} points (grid_size {sizes}), more than {MAX_GRID_POINTS:.3g}: "
            "use a smaller grid_size"
        )


def _data_bounds(X: torch.Tensor) -> list[tuple[float, float]]:
    # host round trip: the bounds become Python floats (the grid's configuration)
    lo = X.detach().amin(0).double().cpu()
    hi = X.detach().amax(0).double().cpu()
    span = torch.where(hi > lo, hi - lo, torch.ones_like(hi))
    return [
        (float(a - DATA_MARGIN * s), float(b + DATA_MARGIN * s))
        for a, b, s in zip(lo, hi, span, strict=True)
    ]
