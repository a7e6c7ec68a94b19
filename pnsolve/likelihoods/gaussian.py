"""Gaussian likelihood ``y = f + ε``, ``ε ~ N(0, σ²)``."""

from __future__ import annotations

import math

import torch

from .._core.validation import check_positive_number, check_real_targets
from ..linops.scaled_identity import ScaledIdentity
from .base import Likelihood

__all__ = ["Gaussian"]


class Gaussian(Likelihood):
    """``p(y | f) = N(y; f, σ²)``: GP regression; one Newton step is exact.

    ``log p = −½ log(2πσ²) − (y − f)²/(2σ²)``, ``g = (y − f)/σ²``, ``W = I/σ²``,
    ``W⁻¹ = σ² I`` (both :class:`~pnsolve.linops.ScaledIdentity`). The Newton step's
    pseudo-targets are ``f + W⁻¹ g = y``: a Laplace method with this likelihood is GP
    regression with noise ``σ²``.

    Parameters
    ----------
    noise
        ``σ² > 0``: a Python number or a 0-d tensor (a tensor keeps autograd to it).

    Notes
    -----
    :meth:`predict` returns the predictive mean of ``y``, which equals the latent mean
    (for every method; ``"mc"`` averages latent draws). The predictive variance of
    ``y`` is ``var + σ²``.
    """

    num_latent = 1
    analytic_methods = ("closed_form", "probit")

    def __init__(self, noise: float | torch.Tensor = 1.0) -> None:
        check_positive_number(noise, "noise", what="variance", tensor=True)
        self._noise_value = noise

    @property
    def noise_variance(self) -> float | torch.Tensor:
        """``σ²``, as given."""
        return self._noise_value

    def __repr__(self) -> str:
        return f"Gaussian(noise={float(self._noise_value):g})"

    def _sigma2(self, like: torch.Tensor) -> float | torch.Tensor:
        s = self._noise_value
        return s.to(like.dtype).to(like.device) if isinstance(s, torch.Tensor) else s

    def check_targets(self, y: object) -> torch.Tensor:
        """Finite real targets ``(n,)``; integer tensors become floating."""
        return check_real_targets(y, "y")

    def _log_likelihood(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s2 = self._sigma2(f)
        log_s2 = torch.log(torch.as_tensor(s2, dtype=f.dtype, device=f.device))
        return -0.5 * (math.log(2 * math.pi) + log_s2 + (y - f).square() / s2)

    def _gradient(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (y - f) / self._sigma2(f)

    def _hessian(self, f: torch.Tensor, y: torch.Tensor) -> ScaledIdentity:
        return ScaledIdentity(f.shape[0], 1.0 / self._sigma2(f), dtype=f.dtype, device=f.device)

    def _noise(self, f: torch.Tensor, y: torch.Tensor) -> ScaledIdentity:
        return ScaledIdentity(f.shape[0], self._sigma2(f), dtype=f.dtype, device=f.device)

    def _predict_analytic(self, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        return mean.clone()

    def _response(self, f: torch.Tensor) -> torch.Tensor:
        return f
