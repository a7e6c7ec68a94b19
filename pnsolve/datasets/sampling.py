"""Shared helpers of the synthetic generators: generator checks, exact GP prior draws, casts.

The generators draw in float64 on the generator's device and cast their results to the
requested ``dtype`` and ``device`` at the end (:func:`output_cast`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._core.validation import require_generator as _require_generator

__all__ = [
    "optional_generator",
    "output_cast",
    "output_device",
    "require_generator",
    "sample_gp_prior",
    "standard_normal",
    "uniform",
]


def require_generator(generator: object, name: str = "generator") -> torch.Generator:
    """Require an explicit ``torch.Generator`` (``None`` is refused: no global RNG)."""
    return _require_generator(generator, name, hint="e.g. torch.Generator().manual_seed(0)")


def optional_generator(
    generator: object, name: str, *, default: torch.Generator
) -> torch.Generator:
    """A second, optional generator: ``default`` when ``None``, else checked as ``name``."""
    return default if generator is None else require_generator(generator, name)


def output_device(device: torch.device | str | None) -> torch.device:
    """``device`` as a ``torch.device``; ``None``: torch's default device."""
    # None: torch's default device, resolved by a factory call in this library file
    return torch.empty(0).device if device is None else torch.device(device)


def output_cast(
    dtype: torch.dtype, device: torch.device | str | None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The final cast of a generator's results: ``t ↦ t.to(dtype=dtype, device=device)``.

    Parameters
    ----------
    dtype
        Floating dtype of the results.
    device
        Their device; ``None``: torch's default device (:func:`output_device`).

    Returns
    -------
    Callable
        Maps a tensor of any shape to the same values in ``dtype`` on ``device``.
    """
    target = output_device(device)

    def cast(t: torch.Tensor) -> torch.Tensor:
        return t.to(dtype=dtype, device=target)

    return cast


def standard_normal(*shape: int, generator: torch.Generator) -> torch.Tensor:
    """Float64 N(0, 1) draws on the generator's device."""
    return torch.randn(*shape, generator=generator, dtype=torch.float64, device=generator.device)


def uniform(*shape: int, low: float, high: float, generator: torch.Generator) -> torch.Tensor:
    """Float64 U(low, high) draws on the generator's device."""
    u = torch.rand(*shape, generator=generator, dtype=torch.float64, device=generator.device)
    return low + (high - low) * u


def sample_gp_prior(
    K: torch.Tensor,
    *,
    generator: torch.Generator,
    jitter: float = 1e-8,
    max_tries: int = 6,
) -> torch.Tensor:
    """One draw ``f = L z`` with ``L Lᵀ = K + τ I`` (exact Cholesky), ``z ~ N(0, I)``.

    Parameters
    ----------
    K
        Symmetric PSD float64 matrix of shape ``(n, n)``.
    generator
        Source of ``z``.
    jitter
        Relative jitter: ``τ = jitter · mean(diag K)``; multiplied by 10 (at most
        ``max_tries − 1`` times) while the Cholesky factorisation fails.

    Returns
    -------
    torch.Tensor
        Shape ``(n,)``, float64, on ``K``'s device.
    """
    if not jitter > 0:
        raise ValueError(f"jitter must be positive, got {jitter}")
    n = K.shape[0]
    K = 0.5 * (K.detach() + K.detach().mT)  # data generation: no gradients wanted
    scale = float(K.diagonal().mean()) if n else 1.0
    eye = torch.eye(n, dtype=K.dtype, device=K.device)
    tau = jitter * max(scale, 1e-300)
    for _ in range(max_tries):
        L, info = torch.linalg.cholesky_ex(K + tau * eye)
        if int(info) == 0:
            z = standard_normal(n, generator=generator).to(K.device)
            return L @ z
        tau *= 10.0
    raise ValueError(f"K is not positive semi-definite: Cholesky failed even with jitter {tau}")
