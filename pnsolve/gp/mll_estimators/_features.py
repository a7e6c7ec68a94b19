"""Random Fourier features from frozen base draws, evaluated under the current kernel."""

from __future__ import annotations

import torch

from ...kernels.base import StationaryKernel
from ...kernels.random_features import RandomFourierFeatures

__all__ = ["draw_feature_base", "rff_features"]


def draw_feature_base(
    kernel: StationaryKernel,
    num_features: int,
    X: torch.Tensor,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Base frequencies ``ε`` ``(m, d)`` and phases ``b`` ``(m,)`` as
    :class:`~pnsolve.kernels.RandomFourierFeatures` draws them (same generator calls, in
    ``X``'s dtype, on ``generator``'s device), moved to ``X``'s device.
    """
    with torch.no_grad():
        rff = RandomFourierFeatures(
            kernel,
            num_features,
            X.shape[1],
            generator=generator,
            dtype=X.dtype,
            device=generator.device,
        )
    return rff.base_frequencies.to(X.device), rff.phases.to(X.device)


def rff_features(
    kernel: StationaryKernel,
    X: torch.Tensor,
    base_frequencies: torch.Tensor,
    phases: torch.Tensor,
) -> torch.Tensor:
    """``φ(X) = sqrt(2·outputscale/m) cos((X / ℓ) εᵀ + b)``, shape ``(n, m)``.

    The formula of :meth:`pnsolve.kernels.RandomFourierFeatures.features`, with the base
    draws passed in (the estimator's frozen state is plain tensors, not tied to one kernel
    object). Uses the kernel's *current* lengthscale and outputscale; differentiable.
    """
    proj = torch.addmm(phases, kernel.scale_inputs(X), base_frequencies.mT)
    scale = torch.sqrt(2.0 * kernel.outputscale_like(X) / base_frequencies.shape[0])
    return scale * torch.cos(proj)
