"""Private helpers shared by the solution beliefs: queries along directions, prior draws."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._core.validation import check_generator, check_tensor
from ..linops.base import LinearOperator
from .priors import Prior

__all__ = ["along_directions", "direction_columns", "draw_prior"]


def direction_columns(
    directions: torch.Tensor, mean: torch.Tensor, count: str = "k"
) -> torch.Tensor:
    """The checked directions as columns: shape ``(n, k)`` (``(n, 1)`` for one direction).

    Parameters
    ----------
    directions
        ``(n,)`` or ``(n, k)``, with ``mean``'s dtype and device.
    mean
        The belief's mean, shape ``(n,)``.
    count
        The symbol for the number of directions in the shape error message.

    Raises
    ------
    TypeError
        ``directions`` is not a tensor, or has another dtype or device than ``mean``.
    ValueError
        ``directions`` has another shape.
    """
    check_tensor(directions, "directions")
    n = mean.shape[0]
    if directions.ndim not in (1, 2) or directions.shape[0] != n:
        raise ValueError(
            f"directions must have shape ({n},) or ({n}, {count}), got {tuple(directions.shape)}"
        )
    if directions.dtype != mean.dtype or directions.device != mean.device:
        raise TypeError(
            f"directions must have dtype {mean.dtype} on {mean.device}, got "
            f"{directions.dtype} on {directions.device}"
        )
    return directions.unsqueeze(-1) if directions.ndim == 1 else directions


def along_directions(
    directions: torch.Tensor,
    mean: torch.Tensor,
    f: Callable[[torch.Tensor], torch.Tensor],
    count: str = "k",
) -> torch.Tensor:
    """``f`` of the checked directions as columns; one value for one direction ``(n,)``.

    Parameters
    ----------
    directions, mean, count
        As in :func:`direction_columns`.
    f
        Maps the directions as columns ``(n, k)`` to one value per column ``(k,)``.

    Returns
    -------
    torch.Tensor
        ``f``'s values, shape ``()`` for ``directions`` of shape ``(n,)``, else ``(k,)``.
    """
    out = f(direction_columns(directions, mean, count))
    return out.squeeze(0) if directions.ndim == 1 else out


def draw_prior(
    prior: Prior, A: LinearOperator, k: int, generator: torch.Generator | None
) -> torch.Tensor:
    """``k`` draws ``y ~ N(0, Σ₀)`` of the prior covariance for ``A``, shape ``(n, k)``.

    Parameters
    ----------
    prior
        The belief's prior (``Σ₀``).
    A
        The system operator, shape ``(n, n)``.
    k
        Number of draws, a positive int.
    generator
        The only source of randomness (``None``: torch's global generator).

    Raises
    ------
    TypeError
        ``generator`` is neither a ``torch.Generator`` nor ``None``.
    ValueError
        ``k`` is not a positive int.
    """
    check_generator(generator)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    return prior.sample(A, k, generator)
