"""Rational quadratic kernel: a scale mixture of RBF kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from .._core import random as rnd
from ._exp import clamped_exp_
from .base import StationaryKernel
from .positive import inv_softplus, one_device, positive_value, softplus

__all__ = ["RationalQuadratic"]


class RationalQuadratic(StationaryKernel):
    """``k(x, x') = outputscale · (1 + r² / (2α))^(−α)``, ``r = ‖x − x'‖ / lengthscale``.

    The RBF kernel's lengthscales mixed by ``λ ~ Gamma(α, rate α)``: ``k`` is
    ``E_λ[outputscale · exp(−λ r² / 2)]``, so small ``α`` mixes many scales and
    ``α → ∞`` recovers the RBF. The same parameterisation as scikit-learn's
    ``RationalQuadratic(length_scale, alpha)`` and GPyTorch's ``RQKernel``.

    Parameters
    ----------
    lengthscale, outputscale, ard_dims, active_dims
        As for :class:`~pnsolve.kernels.StationaryKernel` (a float or a ``(d,)`` tensor for
        ARD; a float; broadcast a scalar lengthscale to ``ard_dims`` dimensions).
    alpha
        The scale-mixture parameter ``α > 0`` (a float or 0-d tensor), learned like the
        others (stored as ``raw_alpha`` with ``α = softplus(raw_alpha)``, in float64).

    Notes
    -----
    Spectral density: ``ω = √λ z / lengthscale`` with ``z ~ N(0, I)`` and
    ``λ ~ Gamma(α, rate α)``. The draws depend on ``α``, so random Fourier features are
    drawn at the current ``α`` and refuse to evaluate after it changed
    (:class:`~pnsolve.kernels.RandomFourierFeatures`): redraw them, or keep ``α`` fixed
    (``kernel.raw_alpha.requires_grad_(False)``) when features are trained through.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> k = pn.kernels.RationalQuadratic(lengthscale=0.5, alpha=2.0)
    >>> k(torch.zeros(2, 3, dtype=torch.float64))[0, 1].item()
    1.0
    """

    spectral_family = "gaussian_scale_mixture"

    def __init__(
        self,
        lengthscale: float | torch.Tensor = 1.0,
        alpha: float | torch.Tensor = 1.0,
        outputscale: float | torch.Tensor = 1.0,
        *,
        ard_dims: int | None = None,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(lengthscale, outputscale, ard_dims=ard_dims, active_dims=active_dims)
        a = positive_value(alpha, "alpha")
        if a.ndim != 0:
            raise ValueError(f"alpha must be a scalar, got shape {tuple(a.shape)}")
        ls, _, a = one_device(
            lengthscale=(self.raw_lengthscale.detach(), lengthscale),
            outputscale=(self.raw_outputscale.detach(), outputscale),
            alpha=(a, alpha),
        )
        self.to(ls.device)  # where alpha alone came as a tensor, the numbers follow it
        self.raw_alpha = nn.Parameter(inv_softplus(a))

    @property
    def alpha(self) -> torch.Tensor:
        """Positive scale-mixture parameter ``α``, shape ``()``."""
        return softplus(self.raw_alpha)

    @alpha.setter
    def alpha(self, value: float | torch.Tensor) -> None:
        self._set_raw(self.raw_alpha, value, "alpha")

    def _alpha_like(self, t: torch.Tensor) -> torch.Tensor:
        return self.alpha.to(dtype=t.dtype, device=t.device)

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        """Differentiable ``(1 + r²/(2α))^(−α)`` (see :meth:`StationaryKernel.profile`)."""
        a = self._alpha_like(r2)
        return torch.exp(-a * torch.log1p(r2 / (2 * a)))

    def profile_(self, s: torch.Tensor, work: torch.Tensor | None) -> torch.Tensor:
        """In place ``s ← (1 + s/(2α))^(−α)`` on a tile holding ``r²``.

        The exponent ``−α log1p(s/(2α))`` is clamped at
        :func:`~pnsolve.kernels._exp.exp_floor` (large ``α`` with short lengthscales
        reach below it): entries change by less than ``1.02 · finfo.tiny``.
        """
        with torch.no_grad():
            a = self._alpha_like(s)
            return clamped_exp_(s.div_(2 * a).log1p_().mul_(-a))

    def keops_profile(self, d2: Any, like: torch.Tensor | None = None) -> Any:
        """The profile as a pykeops formula; ``α`` enters as a parameter, not a constant.

        ``like`` (the scaled inputs) gives ``α``'s dtype and device. As a parameter,
        ``α`` neither triggers a new compilation when it changes nor loses its gradient.
        """
        from .backends.keops import import_lazy_tensor

        if like is None:
            raise ValueError("RationalQuadratic.keops_profile needs like= (the scaled inputs)")
        a = import_lazy_tensor()(self._alpha_like(like).reshape(1))
        return ((1.0 + d2 / (2.0 * a)).log() * (-a)).exp()

    def _spectral_draws(self, shape, generator, dtype, device) -> torch.Tensor:
        """``√λ z`` with ``λ ~ Gamma(α, rate α)`` per feature (row) and ``z ~ N(0, I)``."""
        z = rnd.randn(shape, generator=generator, dtype=dtype, device=device)
        lam = gamma_draws(float(self.alpha.detach()), shape[0], generator=generator, dtype=dtype)
        return z * lam.to(device).sqrt().unsqueeze(1)

    def spectral_state(self) -> tuple[float, ...]:
        """The values the spectral draws depend on besides the lengthscale: ``(α,)``."""
        return (float(self.alpha.detach()),)

    def extra_repr(self) -> str:
        """Hyperparameter values for the module's repr."""
        return super().extra_repr() + f", alpha={float(self.alpha.detach()):.4g}"


def gamma_draws(
    shape_param: float, num: int, *, generator: torch.Generator, dtype: torch.dtype
) -> torch.Tensor:
    """``num`` draws of ``Gamma(shape_param, rate shape_param)`` (mean 1) from ``generator``.

    Marsaglia & Tsang (2000): for shape ``a ≥ 1``, ``d = a − 1/3``, ``c = 1/√(9d)``, propose
    ``v = (1 + c z)³`` with ``z ~ N(0, 1)`` and accept when ``log u < z²/2 + d − d v +
    d log v``; shape ``a < 1`` draws with ``a + 1`` and multiplies by ``u^{1/a}``. Every
    uniform and normal comes from ``generator`` (torch's own Gamma sampler takes none).
    Returns a CPU tensor ``(num,)`` on ``generator``'s device.
    """
    a = float(shape_param)
    boost = a < 1.0
    d = (a + 1.0 if boost else a) - 1.0 / 3.0
    c = 1.0 / (9.0 * d) ** 0.5
    out = torch.empty(num, dtype=torch.float64, device=generator.device)
    todo = torch.arange(num, device=generator.device)
    while todo.numel() > 0:
        z = rnd.randn(todo.numel(), generator=generator, dtype=torch.float64, device=out.device)
        u = rnd.rand(todo.numel(), generator=generator, dtype=torch.float64, device=out.device)
        v = (1.0 + c * z) ** 3
        ok = v > 0
        logv = torch.log(torch.where(ok, v, torch.ones_like(v)))
        ok &= torch.log(u) < 0.5 * z * z + d - d * v + d * logv
        out[todo[ok]] = d * v[ok]
        todo = todo[~ok]
    if boost:
        u = rnd.rand(num, generator=generator, dtype=torch.float64, device=out.device)
        out = out * u ** (1.0 / a)
    return (out / a).to(dtype)
