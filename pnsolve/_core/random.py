"""Random draws: made on the generator's device, then moved to the data's device.

The one convention pnsolve follows for randomness (design rule 6). Every draw takes an
explicit ``torch.Generator``; the numbers are drawn where that generator lives
(``device=generator.device``) and the result is moved to ``device``, the device of the
data the draw is for. So any generator works with data on any device, and a CPU
generator (``torch.Generator()``) gives the same numbers whether the data live on the
CPU or on a GPU: a seed reproduces a run across devices. On the generator's own device
the move is free (``.to`` returns the tensor itself), and the numbers are those of the
plain ``torch`` call with ``device=generator.device``.

Every function here takes the data's ``device`` (and ``dtype`` for floating draws)
explicitly; callers pass their input's, e.g. ``device=X.device, dtype=X.dtype``.
``generator=None`` (accepted only where a public function documents it) draws from
torch's global generator of ``device``.
"""

from __future__ import annotations

import torch

__all__ = ["rademacher", "rand", "randint", "randn", "randperm"]

Shape = int | tuple[int, ...] | torch.Size


def _shape(shape: Shape) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _where(generator: torch.Generator | None, device: torch.device | str) -> torch.device:
    """The device a draw is made on: the generator's (``device`` for the global one)."""
    return torch.device(device) if generator is None else generator.device


def randn(
    shape: Shape,
    *,
    generator: torch.Generator | None,
    dtype: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """Standard normal draws of ``shape`` and ``dtype``, on ``device``."""
    at = _where(generator, device)
    return torch.randn(_shape(shape), generator=generator, dtype=dtype, device=at).to(device)


def rand(
    shape: Shape,
    *,
    generator: torch.Generator | None,
    dtype: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """Uniform draws on ``[0, 1)`` of ``shape`` and ``dtype``, on ``device``."""
    at = _where(generator, device)
    return torch.rand(_shape(shape), generator=generator, dtype=dtype, device=at).to(device)


def randint(
    low: int,
    high: int,
    shape: Shape,
    *,
    generator: torch.Generator | None,
    device: torch.device | str,
) -> torch.Tensor:
    """Integers uniform on ``[low, high)`` (int64) of ``shape``, on ``device``."""
    at = _where(generator, device)
    return torch.randint(low, high, _shape(shape), generator=generator, device=at).to(device)


def randperm(
    n: int, *, generator: torch.Generator | None, device: torch.device | str
) -> torch.Tensor:
    """A uniformly random permutation of ``0, ..., n - 1`` (int64), on ``device``."""
    at = _where(generator, device)
    return torch.randperm(n, generator=generator, device=at).to(device)


def rademacher(
    shape: Shape,
    *,
    generator: torch.Generator | None,
    dtype: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """Independent signs ±1 with probability 1/2 each, of ``shape`` and ``dtype``.

    Drawn as ``2 b - 1`` from bits ``b = randint(0, 2, shape)``.
    """
    bits = randint(0, 2, shape, generator=generator, device=device)
    return bits.to(dtype).mul_(2).sub_(1)
