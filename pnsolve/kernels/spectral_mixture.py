"""Spectral mixture kernel (Wilson & Adams 2013)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from .._core import random as rnd
from ._distance import scaled_sqdist
from ._exp import clamped_exp_
from .kernel import TileOperands
from .leaf import LeafKernel, positive_property
from .spectrum import empirical_spectral_mixture

__all__ = ["SpectralMixture"]


class SpectralMixture(LeafKernel):
    """``k(τ) = Σ_q w_q Π_j exp(−2π² τ_j² v_qj) cos(2π τ_j μ_qj)``, ``τ = x − x'``.

    Wilson & Adams (2013), eq. 12: the spectral density is a mixture of ``Q`` Gaussians
    (means ``μ_q``, diagonal variances ``v_q``, symmetrised about zero), so any
    stationary kernel can be approximated by enough components. For one-dimensional
    inputs it is GPyTorch's ``SpectralMixtureKernel`` (``mixture_scales = √v``); for
    ``d > 1`` GPyTorch multiplies one-dimensional mixtures over the dimensions
    (``Π_j Σ_q``), pnsolve sums products as the paper's eq. 12 (``Σ_q Π_j``).

    Parameters
    ----------
    num_mixtures
        ``Q ≥ 1``.
    ard_dims
        Input dimensions ``d`` with their own means and variances (default:
        ``len(active_dims)``, else that of ``means``/``variances``, else *shared*: one
        mean and variance per component for every input column, which then takes inputs
        of any ``d``, as GPyTorch's default ``ard_num_dims=1``).
    weights
        ``(Q,)`` positive mixture weights ``w_q`` (default ``1/Q`` each); their sum is
        ``k(x, x)``.
    means
        ``(Q, d)`` positive spectral means ``μ_q`` (frequencies, cycles per input unit;
        the kernel is even in each, so positive loses nothing). Default: spread over
        ``(0, 1/2]``.
    variances
        ``(Q, d)`` positive spectral variances ``v_q`` (default ``(1/(4Q))²``).
    active_dims
        Input columns the kernel reads (default all).

    Notes
    -----
    Start from the data with :meth:`from_data` (the empirical spectrum, as GPyTorch's
    ``initialize_from_data_empspect``): mixtures are multimodal in their parameters and
    a generic start rarely finds the periods. Each tile costs, per component, one GEMM
    and one ``exp`` (the Gaussian factor, as an RBF tile) plus one rank-2 GEMM and one
    multiplication per input dimension (the cosines, as ``cos u cos u' + sin u sin u'``).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> k = pn.kernels.SpectralMixture(num_mixtures=2, weights=torch.tensor([0.3, 0.7]))
    >>> k(torch.zeros(1, 1, dtype=torch.float64)).item()
    1.0
    """

    stationary = True

    def __init__(
        self,
        num_mixtures: int,
        *,
        ard_dims: int | None = None,
        weights: float | torch.Tensor | None = None,
        means: torch.Tensor | None = None,
        variances: torch.Tensor | None = None,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        if isinstance(num_mixtures, bool) or not isinstance(num_mixtures, int) or num_mixtures < 1:
            raise ValueError(f"num_mixtures must be a positive int, got {num_mixtures!r}")
        super().__init__(active_dims)
        Q = num_mixtures
        d = _input_dim(ard_dims, self.active_dims, means, variances)
        #: Whether one mean and variance per component serve every input column.
        self.shared = (
            ard_dims is None
            and self.active_dims is None
            and d == 1
            and not any(isinstance(v, torch.Tensor) and v.ndim == 2 for v in (means, variances))
        )
        # defaults where torch puts a module's parameters (its default device), or where
        # the given values are
        given = [v for v in (weights, means, variances) if isinstance(v, torch.Tensor)]
        dev = given[0].device if given else torch.get_default_device()
        f64 = torch.float64
        if weights is None:
            weights = torch.full((Q,), 1.0 / Q, dtype=f64, device=dev)
        if means is None:
            grid = torch.arange(1, Q + 1, dtype=f64, device=dev) / (2.0 * Q)
            means = grid.unsqueeze(1).expand(Q, d).clone()
        if variances is None:
            variances = torch.full((Q, d), (1.0 / (4.0 * Q)) ** 2, dtype=f64, device=dev)
        for name, v, shape in (
            ("weights", torch.as_tensor(weights, device=dev), (Q,)),
            ("means", torch.as_tensor(means, device=dev), (Q, d)),
            ("variances", torch.as_tensor(variances, device=dev), (Q, d)),
        ):
            if tuple(v.shape) != shape:
                raise ValueError(f"{name} must have shape {shape}, got {tuple(v.shape)}")
        self._positive_parameters(weights=(weights, 1), means=(means, 2), variances=(variances, 2))
        self.num_mixtures = Q
        self.dims = d

    @classmethod
    def from_data(
        cls,
        X: torch.Tensor,
        y: torch.Tensor,
        num_mixtures: int,
        *,
        active_dims: Sequence[int] | None = None,
        num_frequencies: int = 2000,
    ) -> SpectralMixture:
        """A kernel initialised from the empirical spectrum of ``y`` over ``X``.

        Per active input column: the Lomb–Scargle periodogram of the centred targets
        (irregular inputs allowed) on ``num_frequencies`` frequencies up to the Nyquist
        frequency of the median spacing, then a ``Q``-component Gaussian mixture fitted
        to it (weighted EM, deterministic start at the spectrum's quantiles). The
        weights are ``var(y)`` times the mixture proportions.

        Parameters
        ----------
        X
            Inputs ``(n, d)``.
        y
            Targets ``(n,)``.
        num_mixtures
            ``Q``.
        active_dims
            As for the constructor.
        num_frequencies
            Frequencies of the periodogram.

        Returns
        -------
        SpectralMixture
            With ``d`` = the active columns of ``X``.
        """
        k = cls(num_mixtures, ard_dims=None if active_dims else X.shape[1], active_dims=active_dims)
        k.initialize_from_data(X, y, num_frequencies=num_frequencies)
        return k

    def initialize_from_data(
        self, X: torch.Tensor, y: torch.Tensor, *, num_frequencies: int = 2000
    ) -> None:
        """Set weights, means and variances from the empirical spectrum (see :meth:`from_data`)."""
        X, _ = self.check_inputs(X)
        y = torch.as_tensor(y, device=X.device)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have shape ({X.shape[0]},), got {tuple(y.shape)}")
        w, mu, v = empirical_spectral_mixture(
            self.select(X).detach().double().cpu(),
            y.detach().double().cpu(),
            self.num_mixtures,
            num_frequencies=num_frequencies,
        )
        self._set_value("weights", w)
        self._set_value("means", mu)
        self._set_value("variances", v)

    # ------------------------------------------------------------ parameters
    weights = positive_property("weights", "Mixture weights ``w``, shape ``(Q,)``.")

    means = positive_property("means", "Spectral means ``μ``, shape ``(Q, d)``.")

    variances = positive_property("variances", "Spectral variances ``v``, shape ``(Q, d)``.")

    def input_dims(self) -> tuple[int | None, int]:
        """The input columns the kernel needs (any number with :attr:`shared` ones).

        ``(d, 0)``, or ``(None, 1 + largest active column)`` with ``active_dims``, or
        ``(None, 0)`` with shared parameters.
        """
        if self.active_dims is not None:
            return None, max(self.active_dims) + 1
        return (None, 0) if self.shared else (self.dims, 0)

    def _columns(self, input_dim: int) -> int:
        """The columns the kernel reads, for inputs with ``input_dim`` columns."""
        return input_dim if self.shared else self.dims

    # ------------------------------------------------------------ evaluation
    def _parts(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(z, θ, w)``: ``z_q = 2π √v_q ⊙ x`` ``(Q, n, d)``, ``θ_q = 2π μ_q ⊙ x``, weights."""
        Z = self.select(X)
        two_pi = 2.0 * math.pi
        z = two_pi * self._value("variances", X).sqrt().unsqueeze(1) * Z
        theta = two_pi * self._value("means", X).unsqueeze(1) * Z
        return z, theta, self._value("weights", X)

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """Per component: augmented ``z_q`` (``A Bᵀ = −‖z − z'‖²/2``) and ``[cos θ, sin θ]``."""
        z, theta, w = self._parts(X)
        sq = (z * z).sum(-1, keepdim=True)
        one = torch.ones_like(sq)
        aug = torch.cat([z, -0.5 * sq, -0.5 * one] if left else [z, one, sq], dim=2)
        trig = torch.stack([torch.cos(theta), torch.sin(theta)], dim=3)  # (Q, n, d, 2)
        ops = tuple((aug[q], trig[q]) for q in range(self.num_mixtures))
        if not left:
            return ops
        return (*ops, tuple(w[q] / w[0] for q in range(1, self.num_mixtures)))

    @property
    def tile_buffers(self) -> int:  # type: ignore[override]
        """A tile for the cosine factors, and one for each later component."""
        return 2 if self.num_mixtures > 1 else 1

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """Each component: Gaussian factor (GEMM, ``exp``) times one cosine factor per column."""
        cos_tile = work[-1]
        for q in range(self.num_mixtures):
            target = s if q == 0 else work[0]
            (aug_a, trig_a), (aug_b, trig_b) = a[q], b[q]
            torch.mm(aug_a, aug_b.mT, out=target)
            if diag is not None:
                target.diagonal(diag).zero_()
            clamped_exp_(target)  # Gaussian factor, exponent floored (kernels/_exp.py)
            for j in range(trig_a.shape[1]):
                torch.mm(trig_a[:, j], trig_b[:, j].mT, out=cos_tile)
                if diag is not None:
                    cos_tile.diagonal(diag).fill_(1.0)
                target.mul_(cos_tile)
            if q > 0:
                s.addcmul_(target, a[-1][q - 1])

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """The first weight (the others enter the tiles as ratios to it)."""
        return self._value("weights", like)[0]

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        z1, t1, w = self._parts(X1)
        z2, t2, _ = (z1, t1, w) if X2 is None else self._parts(X2)
        if X2 is None and self_index is None:
            self_index = torch.arange(X1.shape[0], device=X1.device)
        mask = None
        if self_index is not None:
            cols = torch.arange(z2.shape[1], device=X1.device)
            mask = self_index.unsqueeze(-1) == cols.unsqueeze(0)
        out = None
        for q in range(self.num_mixtures):
            term = torch.exp(-0.5 * scaled_sqdist(z1[q], z2[q], self_index))
            for j in range(z1.shape[2]):
                c = torch.cos(t1[q, :, j, None]) * torch.cos(t2[q, None, :, j])
                c = c + torch.sin(t1[q, :, j, None]) * torch.sin(t2[q, None, :, j])
                if mask is not None:
                    c = torch.where(mask, torch.ones((), dtype=c.dtype, device=c.device), c)
                term = term * c
            out = w[q] * term if out is None else out + w[q] * term
        assert out is not None
        return out

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return self._value("weights", X).sum() * X.new_ones(X.shape[0])

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        tau = self.select(X1) - self.select(X2)  # (m, d)
        v, mu = self._value("variances", X1), self._value("means", X1)
        gauss = torch.exp(-2.0 * math.pi**2 * (tau.unsqueeze(0) ** 2 * v.unsqueeze(1)).sum(-1))
        cosine = torch.cos(2.0 * math.pi * tau.unsqueeze(0) * mu.unsqueeze(1)).prod(-1)
        return (self._value("weights", X1).unsqueeze(1) * gauss * cosine).sum(0)

    has_spectral_features = True

    def spectral_width(self, input_dim: int) -> int:
        """A component draw, then a sign and a standard normal per active column."""
        return 1 + 2 * self._columns(input_dim)

    def spectral_base(
        self,
        num_features: int,
        input_dim: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> torch.Tensor:
        """``[u, s, ε]`` per feature, ``(m, 1 + 2d)``.

        ``u ~ U[0, 1)`` (the component ``⌊uQ⌋``), signs ``s = ±1`` and ``ε ~ N(0, I)``
        per column, from ``generator`` (:mod:`pnsolve._core.random`).
        """
        d = self._columns(input_dim)
        u = rnd.rand((num_features, 1), generator=generator, dtype=dtype, device=device)
        flips = rnd.rand((num_features, d), generator=generator, dtype=dtype, device=device)
        signs = torch.where(flips < 0.5, -1.0, 1.0).to(dtype)
        eps = rnd.randn((num_features, d), generator=generator, dtype=dtype, device=device)
        return torch.cat([u, signs, eps], dim=1)

    def spectral_projection(
        self, X: torch.Tensor, base: torch.Tensor, phases: torch.Tensor, num_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``ω = s ⊙ μ_q + √v_q ⊙ ε`` (cycles per unit) and amplitude ``Q w_q``.

        The component ``q = ⌊uQ⌋`` is uniform whatever the weights, and ``Q w_q`` weighs
        it back (importance sampling), so the features stay unbiased and differentiable
        while the weights move. Per column the sign symmetrises the density (the paper's
        product over dimensions of ``cos(2π τ_j μ_qj)``).
        """
        d, Q = self._columns(X.shape[1]), self.num_mixtures
        q = (base[:, 0] * Q).long().clamp_(0, Q - 1)
        signs, eps = base[:, 1 : 1 + d], base[:, 1 + d : 1 + 2 * d]
        mu, var = self._value("means", X)[q], self._value("variances", X)[q]
        omega = signs.to(X.dtype) * mu + var.sqrt() * eps.to(X.dtype)
        proj = torch.addmm(phases, self.select(X), omega.mT, alpha=2.0 * math.pi)
        return proj, Q * self._value("weights", X)[q]

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """The sum over components as one formula (weight ratios as pykeops parameters)."""
        za, ta, w = self._parts(A)
        zb, tb, _ = self._parts(B)
        out = None
        for q in range(self.num_mixtures):
            d2 = LazyTensor(za[q].contiguous()[:, None, :]).sqdist(
                LazyTensor(zb[q].contiguous()[None, :, :])
            )
            term = (-0.5 * d2).exp()
            for j in range(za.shape[2]):
                fa = torch.stack([torch.cos(ta[q, :, j]), torch.sin(ta[q, :, j])], dim=1)
                fb = torch.stack([torch.cos(tb[q, :, j]), torch.sin(tb[q, :, j])], dim=1)
                term = term * (LazyTensor(fa[:, None, :]) | LazyTensor(fb[None, :, :]))
            if q == 0:
                out = term
            else:
                out = out + LazyTensor((w[q] / w[0]).reshape(1)) * term
        return out

    def extra_repr(self) -> str:
        """Components and dimensions."""
        dims = "shared" if self.shared else str(self.dims)
        return f"num_mixtures={self.num_mixtures}, dims={dims}{self._dims_repr()}"


def _input_dim(
    ard_dims: int | None,
    active_dims: tuple[int, ...] | None,
    means: torch.Tensor | None,
    variances: torch.Tensor | None,
) -> int:
    """``d`` from the first of ``ard_dims``, ``active_dims``, ``means``, ``variances``."""
    if ard_dims is not None:
        if isinstance(ard_dims, bool) or not isinstance(ard_dims, int) or ard_dims < 1:
            raise ValueError(f"ard_dims must be a positive int, got {ard_dims!r}")
        if active_dims is not None and len(active_dims) != ard_dims:
            raise ValueError(f"ard_dims={ard_dims} but active_dims has {len(active_dims)} columns")
        return ard_dims
    if active_dims is not None:
        return len(active_dims)
    for given in (means, variances):
        shape = tuple(given.shape) if isinstance(given, torch.Tensor) else ()
        if len(shape) == 2:
            return int(shape[1])
    return 1
