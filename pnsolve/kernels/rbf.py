"""Squared-exponential (RBF) kernel."""

from __future__ import annotations

from typing import Any

import torch

from .._core import random as rnd
from ._exp import clamped_exp_
from .base import StationaryKernel

__all__ = ["RBF"]


class RBF(StationaryKernel):
    """``k(x, x') = outputscale · exp(−r²/2)`` with ``r = ‖x − x'‖ / lengthscale``.

    Parameters
    ----------
    lengthscale, outputscale, ard_dims, active_dims
        As for :class:`~pnsolve.kernels.StationaryKernel` (a float or a ``(d,)`` tensor for
        ARD; a float; broadcast a scalar lengthscale to ``ard_dims`` dimensions).

    Notes
    -----
    Spectral density: Gaussian, ``ω ~ N(0, I / lengthscale²)``.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> k = pn.kernels.RBF(lengthscale=0.5)
    >>> k(torch.zeros(2, 3, dtype=torch.float64)).shape
    torch.Size([2, 2])
    """

    spectral_family = "gaussian"
    tile_factor = -0.5
    separable = True
    tile_exp = True

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        """Differentiable RBF profile ``exp(−r²/2)`` (see :meth:`StationaryKernel.profile`)."""
        return torch.exp(-0.5 * r2)

    has_profile_slope = True

    def profile_slope_(self, r2: torch.Tensor) -> tuple[torch.Tensor, float]:
        """``(exp(−r²/2), −1/2)``: the slope is ``−κ/2`` (``r2`` becomes ``κ``).

        The exponent is clamped at :func:`~pnsolve.kernels._exp.exp_floor` (entries change
        by less than ``1.02 · finfo.tiny``; none is subnormal).
        """
        return clamped_exp_(r2.mul_(-0.5)), -0.5

    def profile_(self, s: torch.Tensor, work: torch.Tensor | None) -> torch.Tensor:
        """In place ``s ← exp(max(s, floor))`` on a tile holding ``−r²/2``.

        The floor (:func:`~pnsolve.kernels._exp.exp_floor`, ``log(finfo.tiny) + 1/64``)
        keeps ``exp`` on its fast path: entries change by less than ``1.02 · finfo.tiny``
        and none is subnormal.
        """
        return clamped_exp_(s)  # s = −r²/2

    def keops_profile(self, d2: Any, like: torch.Tensor | None = None) -> Any:
        """The RBF profile as a pykeops formula (``like`` unused: no other parameters)."""
        return (-0.5 * d2).exp()

    def _spectral_draws(self, shape, generator, dtype, device) -> torch.Tensor:
        """Standard normal draws (the Gaussian spectral density)."""
        return rnd.randn(shape, generator=generator, dtype=dtype, device=device)
