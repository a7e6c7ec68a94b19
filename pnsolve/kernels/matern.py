"""Matérn kernels with smoothness ν ∈ {1/2, 3/2, 5/2}."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .._core import random as rnd
from ._distance import safe_sqrt
from ._exp import exp_floor
from .base import StationaryKernel

__all__ = ["Matern"]

_NUS = (0.5, 1.5, 2.5)


class Matern(StationaryKernel):
    """Matérn kernel, ``r = ‖x − x'‖ / lengthscale``.

    * ν = 1/2: ``outputscale · exp(−r)``
    * ν = 3/2: ``outputscale · (1 + √3 r) exp(−√3 r)``
    * ν = 5/2: ``outputscale · (1 + √5 r + 5r²/3) exp(−√5 r)``

    Parameters
    ----------
    nu
        Smoothness, one of ``0.5, 1.5, 2.5``.
    lengthscale, outputscale, ard_dims, active_dims
        As for :class:`~pnsolve.kernels.StationaryKernel` (a float or a ``(d,)`` tensor for
        ARD; a float; broadcast a scalar lengthscale to ``ard_dims`` dimensions).

    Raises
    ------
    ValueError
        If ``nu`` is not one of the supported values.

    Notes
    -----
    Spectral density: multivariate Student-t with ``2ν`` degrees of freedom and scale
    ``1 / lengthscale``. The square root in ``r`` has a zero gradient at ``r = 0``
    (``ν = 1/2`` is not differentiable there; we return the zero subgradient).
    """

    spectral_family = "student_t"

    def __init__(
        self,
        nu: float = 1.5,
        lengthscale: float | torch.Tensor = 1.0,
        outputscale: float | torch.Tensor = 1.0,
        *,
        ard_dims: int | None = None,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        if isinstance(nu, bool) or not isinstance(nu, int | float) or float(nu) not in _NUS:
            raise ValueError(f"nu must be one of {_NUS}, got {nu!r}")
        super().__init__(lengthscale, outputscale, ard_dims=ard_dims, active_dims=active_dims)
        self.nu = float(nu)
        # tiles hold s = c·r² so that sqrt(s) is √(2ν)·r directly (c = 1, 3, 5)
        self.tile_factor = 2.0 * self.nu
        self.tile_needs_work = self.nu != 0.5
        # ν = 1/2 has dκ/dr² = −exp(−r)/(2r), unbounded at r = 0
        self.has_profile_slope = self.nu != 0.5

    def tile_max(self, dtype: torch.dtype) -> float:
        """``floor²`` (:func:`~pnsolve.kernels._exp.exp_floor`): tiles hold ``t² = 2ν r²``.

        Capping ``t = √(2ν) r`` at ``T = −floor`` keeps ``exp(−t) ≥ finfo.tiny`` on its
        fast path. The profile falls with ``t``, so a capped entry changes from
        ``κ(t) ∈ [0, κ(T))`` to ``κ(T) = p(T) e^{−T}`` (``p`` the polynomial factor):
        less than ``2.7e3 · tiny`` in float32 (``T ≈ 87.3``), and no entry is subnormal
        (float64 is not floored: ``floor = −inf``, no cap; kernels/_exp.py).
        """
        return exp_floor(dtype) ** 2

    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        """Differentiable Matérn profile ``κ(r²)`` (see :meth:`StationaryKernel.profile`)."""
        r = safe_sqrt(r2)
        if self.nu == 0.5:
            return torch.exp(-r)
        if self.nu == 1.5:
            t = math.sqrt(3.0) * r
            return (1.0 + t) * torch.exp(-t)
        t = math.sqrt(5.0) * r
        return (1.0 + t + t * t / 3.0) * torch.exp(-t)

    def profile_slope_(self, r2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | float]:
        """``(κ, dκ/dr²)`` on a tile; ``r2`` is overwritten.

        With ``t = √(2ν) r`` the slope is ``−(3/2) e^{−t}`` (ν = 3/2) and
        ``−(5/6)(1 + t) e^{−t}`` (ν = 5/2); ν = 1/2 has none (unbounded at ``r = 0``).
        """
        if not self.has_profile_slope:
            return super().profile_slope_(r2)
        t = r2.mul_(2.0 * self.nu).sqrt_().clamp_max_(-exp_floor(r2.dtype))  # see tile_max
        e = torch.exp(-t)
        if self.nu == 1.5:
            return t.add_(1.0).mul_(e), e.mul_(-1.5)
        slope = torch.add(t, 1.0).mul_(e).mul_(-5.0 / 6.0)
        return t.addcmul_(t, t, value=1.0 / 3.0).add_(1.0).mul_(e), slope

    def profile_(self, s: torch.Tensor, work: torch.Tensor | None) -> torch.Tensor:
        """In-place Matérn profile on a tile (see :meth:`StationaryKernel.profile_`).

        ``s = t²`` arrives capped by :meth:`tile_max` (``exp(−t)`` stays normal).
        """
        t = s.sqrt_()  # t = √(2ν)·r, in place
        if self.nu == 0.5:
            return t.neg_().exp_()
        assert work is not None
        torch.neg(t, out=work).exp_()  # work = exp(−t)
        if self.nu == 1.5:
            return t.add_(1.0).mul_(work)
        # t ← 1 + t + t²/3 (elementwise aliasing of t with itself is exact)
        return t.addcmul_(t, t, value=1.0 / 3.0).add_(1.0).mul_(work)

    def keops_profile(self, d2: Any, like: torch.Tensor | None = None) -> Any:
        # r = d2 · rsqrt(d2): KeOps defines rsqrt(0) = 0, so r and its gradient are 0 at
        # r = 0 (``d2.sqrt()`` would give a NaN gradient for coincident points)
        """The Matérn profile as a pykeops formula."""
        r = d2 * d2.rsqrt()
        if self.nu == 0.5:
            return (-r).exp()
        c = math.sqrt(3.0) if self.nu == 1.5 else math.sqrt(5.0)
        t = c * r
        if self.nu == 1.5:
            return (1.0 + t) * (-t).exp()
        return (1.0 + t + (5.0 / 3.0) * d2) * (-t).exp()

    def _spectral_draws(self, shape, generator, dtype, device) -> torch.Tensor:
        """Student-t draws with ``2ν`` degrees of freedom (the Matérn spectral density)."""
        # ω = z · sqrt(2ν / u),  z ~ N(0, I),  u ~ χ²(2ν)  (2ν ∈ {1, 3, 5} is an integer,
        # so u is a sum of 2ν squared standard normals)
        df = round(2 * self.nu)
        z = rnd.randn(shape, generator=generator, dtype=dtype, device=device)
        g = rnd.randn((shape[0], df), generator=generator, dtype=dtype, device=device)
        u = (g * g).sum(-1, keepdim=True)
        return z * torch.sqrt(df / u)

    def extra_repr(self) -> str:
        """Smoothness and hyperparameter values for the module's repr."""
        return f"nu={self.nu}, " + super().extra_repr()
