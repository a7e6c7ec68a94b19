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

from collections.abc import Callable

import torch

__all__ = ["rademacher", "rand", "randint", "randn", "randperm"]

Shape = int | tuple[int, ...] | torch.Size
#: The data's device.
Device = torch.device | str
#: An explicit generator, or ``None`` for torch's global generator of the data's device.
OptionalGenerator = torch.Generator | None


def _shape(shape: Shape) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _where(generator: OptionalGenerator, device: Device) -> torch.device:
    """The device a draw is made on: the generator's (``device`` for the global one)."""
    return torch.device(device) if generator is None else generator.device


def _draw(
    factory: Callable[..., torch.Tensor],
    *args: object,
    generator: OptionalGenerator,
    device: Device,
    **kwargs: object,
) -> torch.Tensor:
    """``factory(*args, **kwargs)`` drawn on the generator's device, moved to ``device``.

    Parameters
    ----------
    factory
        A torch random factory (``torch.randn``, ``torch.rand``, ``torch.randint``,
        ``torch.randperm``) taking ``generator=`` and ``device=``.
    *args, **kwargs
        Its other arguments (the shape as a tuple, ``dtype``, ...).
    generator, device
        As in the public functions of this module.

    Returns
    -------
    torch.Tensor
        The draw, of the factory's shape and dtype, on ``device``.
    """
    at = _where(generator, device)
    return factory(*args, generator=generator, device=at, **kwargs).to(device)


def randn(
    shape: Shape, *, generator: OptionalGenerator, dtype: torch.dtype, device: Device
) -> torch.Tensor:
    """Standard normal draws of ``shape`` and ``dtype``, on ``device``."""
    return _draw(torch.randn, _shape(shape), generator=generator, dtype=dtype, device=device)


def rand(
    shape: Shape, *, generator: OptionalGenerator, dtype: torch.dtype, device: Device
) -> torch.Tensor:
    """Uniform draws on ``[0, 1)`` of ``shape`` and ``dtype``, on ``device``."""
    return _draw(torch.rand, _shape(shape), generator=generator, dtype=dtype, device=device)


def randint(
    low: int, high: int, shape: Shape, *, generator: OptionalGenerator, device: Device
) -> torch.Tensor:
    """Integers uniform on ``[low, high)`` (int64) of ``shape``, on ``device``."""
    return _draw(torch.randint, low, high, _shape(shape), generator=generator, device=device)


def randperm(n: int, *, generator: OptionalGenerator, device: Device) -> torch.Tensor:
    """A uniformly random permutation of ``0, ..., n - 1`` (int64), on ``device``."""
    return _draw(torch.randperm, n, generator=generator, device=device)


def rademacher(
    shape: Shape, *, generator: OptionalGenerator, dtype: torch.dtype, device: Device
) -> torch.Tensor:
    """Independent signs ±1 with probability 1/2 each, of ``shape`` and ``dtype``.

    Drawn as ``2 b - 1`` from bits ``b = randint(0, 2, shape)``.
    """
    bits = randint(0, 2, shape, generator=generator, device=device)
    return bits.to(dtype).mul_(2).sub_(1)
