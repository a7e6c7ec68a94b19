"""Abstract stationary kernel ``k(x, x') = outputscale · κ(‖x − x'‖² / lengthscale²)``."""

from __future__ import annotations

import abc
import math
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ._distance import scaled_sqdist
from .active_dims import check_active_dims, minimum_dims, select_dims
from .kernel import Kernel, TileOperands
from .positive import inv_softplus, one_device, positive_value, set_positive_, softplus

__all__ = ["StationaryKernel", "inv_softplus", "softplus"]


class StationaryKernel(Kernel):
    """Base class of stationary kernels with softplus-positive hyperparameters.

    ``k(x, x') = outputscale · κ(r²)`` with ``r² = Σ_j (x_j − x'_j)² / ℓ_j²``. Subclasses
    implement the *profile* ``κ`` three ways: :meth:`profile` (differentiable torch),
    :meth:`profile_` (in place on a tile buffer, no autograd) and :meth:`keops_profile`
    (a pykeops ``LazyTensor`` formula), plus ``_spectral_draws`` (behind
    :meth:`spectral_base`) for random Fourier features.

    Parameters
    ----------
    lengthscale
        Positive float, or a tensor of shape ``()`` or ``(d,)`` (ARD).
    outputscale
        Positive float or 0-d tensor.
    ard_dims
        If given, a scalar ``lengthscale`` is broadcast to ``d = ard_dims`` dimensions.
    active_dims
        Input columns the kernel reads (default all); ARD lengthscales then have one
        entry per active column.

    Notes
    -----
    **Dtype rule.** Hyperparameters are stored as ``raw_lengthscale`` and
    ``raw_outputscale`` with ``value = softplus(raw)``, always in float64 (whatever
    torch's default dtype and whatever floating dtype a tensor value comes in: every
    float32 value is exact in float64). Every computation casts them to the dtype and
    device of the inputs, so float64 data sees the hyperparameters a user typed to
    within a few ulps (the softplus round trip), float32 data gives float32 kernel
    values, and gradients reach the float64 raw parameters either way. Casting the
    module (``kernel.float()``) stores them in float32 for good: precision lost there
    is not restored by ``.double()``.
    """

    #: Name of the spectral density family used by random Fourier features.
    spectral_family: str = ""
    #: Tiles handed to :meth:`profile_` hold ``tile_factor · r²`` (a kernel-chosen scaling
    #: that saves a pass over the tile, e.g. ``−1/2`` for the RBF).
    tile_factor: float = 1.0
    #: Whether :meth:`profile_` needs a scratch buffer of the tile's shape.
    tile_needs_work: bool = False
    #: Whether ``κ(Σ_j r_j²) = Π_j κ(r_j²)`` (a product over dimensions, e.g. the RBF):
    #: then kernel matrices on regular grids are Kronecker products.
    separable: bool = False
    matrix_free = True
    has_keops_formula = True
    stationary = True

    def __init__(
        self,
        lengthscale: float | torch.Tensor = 1.0,
        outputscale: float | torch.Tensor = 1.0,
        *,
        ard_dims: int | None = None,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        #: Input columns the kernel reads (``None``: all).
        self.active_dims = check_active_dims(active_dims)
        ls = positive_value(lengthscale, "lengthscale")
        if ls.ndim > 1:
            raise ValueError(f"lengthscale must be a scalar or have shape (d,), got {ls.shape}")
        if ard_dims is not None:
            if not isinstance(ard_dims, int) or ard_dims < 1:
                raise ValueError(f"ard_dims must be a positive int, got {ard_dims!r}")
            if ls.ndim == 1 and ls.numel() != ard_dims:
                raise ValueError(f"lengthscale has {ls.numel()} entries but ard_dims={ard_dims}")
            ls = ls.expand(ard_dims).clone() if ls.ndim == 0 else ls
        os_ = positive_value(outputscale, "outputscale")
        if os_.ndim != 0:
            raise ValueError(f"outputscale must be a scalar, got shape {tuple(os_.shape)}")
        ls, os_ = one_device(lengthscale=(ls, lengthscale), outputscale=(os_, outputscale))
        self.raw_lengthscale = nn.Parameter(inv_softplus(ls))
        self.raw_outputscale = nn.Parameter(inv_softplus(os_))
        if self.active_dims is not None and ls.ndim == 1 and ls.numel() != len(self.active_dims):
            raise ValueError(
                f"lengthscale has {ls.numel()} entries but active_dims has "
                f"{len(self.active_dims)} columns"
            )

    # ----------------------------------------------------------- hyperparameters
    @property
    def lengthscale(self) -> torch.Tensor:
        """Positive lengthscale, shape ``()`` or ``(d,)`` (ARD)."""
        return softplus(self.raw_lengthscale)

    @lengthscale.setter
    def lengthscale(self, value: float | torch.Tensor) -> None:
        self._set_raw(self.raw_lengthscale, value, "lengthscale")

    @property
    def outputscale(self) -> torch.Tensor:
        """Positive output scale (signal variance), shape ``()``."""
        return softplus(self.raw_outputscale)

    @outputscale.setter
    def outputscale(self, value: float | torch.Tensor) -> None:
        self._set_raw(self.raw_outputscale, value, "outputscale")

    @property
    def ard_dims(self) -> int | None:
        """Number of input dimensions with their own lengthscale, or ``None``."""
        return None if self.raw_lengthscale.ndim == 0 else self.raw_lengthscale.numel()

    def _set_raw(self, raw: nn.Parameter, value: float | torch.Tensor, name: str) -> None:
        set_positive_(raw, value, name)

    # ------------------------------------------------------------ for backends
    def scale_inputs(self, X: torch.Tensor) -> torch.Tensor:
        """``X[:, active_dims] / lengthscale`` in ``X``'s dtype/device (differentiable).

        Shape ``(n, d_active)`` (``d_active = d`` without ``active_dims``).
        """
        X = select_dims(X, self.active_dims)
        return X / self.lengthscale.to(dtype=X.dtype, device=X.device)

    def outputscale_like(self, X: torch.Tensor) -> torch.Tensor:
        """The output scale cast to ``X``'s dtype and device (0-d, differentiable)."""
        return self.outputscale.to(dtype=X.dtype, device=X.device)

    @abc.abstractmethod
    def profile(self, r2: torch.Tensor) -> torch.Tensor:
        """Differentiable ``κ(r²)`` (the kernel without outputscale) on scaled squared distances."""

    @abc.abstractmethod
    def profile_(self, s: torch.Tensor, work: torch.Tensor | None) -> torch.Tensor:
        """In place ``s ← κ(s / tile_factor)`` on a tile of ``s = tile_factor · r²`` (no autograd).

        ``work`` is a scratch tensor of the same shape when :attr:`tile_needs_work`.
        """

    #: Whether :meth:`profile_slope_` has a closed form (finite at ``r² = 0``).
    has_profile_slope: bool = False

    def profile_slope_(self, r2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | float]:
        """``(κ(r²), dκ/dr²)`` on a tile of scaled squared distances, without autograd.

        May overwrite ``r2`` (it is a scratch tile). The slope is a tensor, or a float
        ``c`` meaning ``dκ/dr² = c · κ`` (nothing more is allocated). For backward passes
        that contract the kernel's derivatives in closed form (CaGP's block product);
        only where :attr:`has_profile_slope` is true.

        Raises
        ------
        NotImplementedError
            For kernels without a finite closed-form slope.
        """
        raise NotImplementedError(f"{type(self).__name__} has no closed-form profile slope")

    @abc.abstractmethod
    def keops_profile(self, d2: Any, like: torch.Tensor | None = None) -> Any:
        """``κ`` applied to a pykeops ``LazyTensor`` of scaled squared distances.

        ``like`` is a tensor of the product's dtype and device (the scaled inputs), for
        kernels whose profile has parameters of its own: they must enter the formula as
        pykeops parameters, not as constants (a constant is compiled into the formula).
        """

    has_spectral_features = True

    def spectral_width(self, input_dim: int) -> int:
        """The active columns (one base frequency per input column the kernel reads)."""
        return input_dim if self.active_dims is None else len(self.active_dims)

    def spectral_base(
        self,
        num_features: int,
        input_dim: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> torch.Tensor:
        """Frozen base frequencies ``ε`` of shape ``(num_features, d_active)``.

        ``d_active`` is ``input_dim``, or the number of active columns with
        ``active_dims``. The spectral frequencies for the current hyperparameters are
        ``ε / lengthscale``. Draws from the kernel's spectral density for unit
        lengthscale, through :meth:`_spectral_draws` (what a subclass implements): made
        on ``generator``'s device, returned on ``device`` (:mod:`pnsolve._core.random`).
        """
        shape = (num_features, self.spectral_width(input_dim))
        return self._spectral_draws(shape, generator, dtype, device)

    def sample_spectral_base(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Deprecated name of :meth:`spectral_base` (the same draws)."""
        warnings.warn(
            "StationaryKernel.sample_spectral_base is deprecated; use spectral_base "
            "(the protocol every kernel with random features implements)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.spectral_base(*args, **kwargs)

    def spectral_projection(
        self, X: torch.Tensor, base: torch.Tensor, phases: torch.Tensor, num_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``((x / ℓ) εᵀ + b, outputscale)``: frequencies ``ε / ℓ``."""
        proj = torch.addmm(phases, self.scale_inputs(X), base.mT)
        return proj, self.outputscale_like(X)

    @abc.abstractmethod
    def _spectral_draws(
        self, shape: tuple[int, int], generator: torch.Generator, dtype: torch.dtype, device
    ) -> torch.Tensor:
        """Draws of shape ``shape`` from the spectral density for unit lengthscale."""

    # --------------------------------------------------------------- protocol
    def input_dims(self) -> tuple[int | None, int]:
        """``(ARD lengthscales if every column is read, 1 + largest active column)``."""
        if self.active_dims is None:
            return self.ard_dims, 0
        return None, minimum_dims(self.active_dims)  # the constructor matched the ARD size

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        """Differentiable ``outputscale · κ(r²)`` with exact-zero self distances."""
        Z1 = self.scale_inputs(X1)
        if X2 is None:
            Z2 = Z1
            if self_index is None:
                self_index = torch.arange(X1.shape[0], device=X1.device)
        else:
            Z2 = self.scale_inputs(X2)
        r2 = scaled_sqdist(Z1, Z2, self_index)
        return self.outputscale_like(X1) * self.profile(r2)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        """``k(x_i, x_i) = outputscale`` for each row of ``X``; shape ``(n,)``."""
        return self.outputscale_like(X).expand(X.shape[0])

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        """``outputscale · κ(‖x1_i − x2_i‖² / ℓ²)``, shape ``(m,)``."""
        diff = self.scale_inputs(X1) - self.scale_inputs(X2)
        return self.outputscale_like(X1) * self.profile((diff * diff).sum(-1))

    @property
    def tile_buffers(self) -> int:  # type: ignore[override]
        """One scratch tile when :attr:`tile_needs_work`, else none."""
        return 1 if self.tile_needs_work else 0

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """Augmented inputs: ``[−2c z, c‖z‖², c]`` (left), ``[z, 1, ‖z‖²]`` (right).

        With ``z = x / ℓ`` and ``c`` = :attr:`tile_factor`, one GEMM of a left and a right
        block gives the tile ``c · r²``.
        """
        Z = self.scale_inputs(X)
        sq = (Z * Z).sum(-1, keepdim=True)
        one = torch.ones_like(sq)
        if left:
            c = self.tile_factor
            return (torch.cat([(-2.0 * c) * Z, c * sq, c * one], dim=1),)
        return (torch.cat([Z, one, sq], dim=1),)

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """One GEMM into ``s``, exact-zero self distances, then :meth:`profile_` in place."""
        torch.mm(a[0], b[0].mT, out=s)
        if self.tile_factor > 0:  # sqrt-based profiles need s ≥ 0 exactly
            top = self.tile_max(s.dtype)
            s.clamp_(0.0, top) if top < math.inf else s.clamp_min_(0.0)
        # (for exp-based profiles, s = −r²/2 may exceed 0 by rounding, |s| ≲ eps·‖z‖²,
        # the same relative error r² itself carries; skipping the clamp saves a pass)
        if diag is not None:
            s.diagonal(diag).zero_()
        self.profile_(s, work[0] if self.tile_needs_work else None)

    def tile_max(self, dtype: torch.dtype) -> float:
        """Upper clamp of a tile of ``s = tile_factor · r² ≥ 0`` (default ``inf``: none).

        Folded into the clamp at zero of positive ``tile_factor`` (one pass): a profile
        whose ``exp`` argument falls with ``s`` caps ``s`` where that argument reaches
        :func:`~pnsolve.kernels._exp.exp_floor` (see :class:`~pnsolve.kernels.Matern`).
        """
        return math.inf

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """The output scale (see :meth:`outputscale_like`)."""
        return self.outputscale_like(like)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``κ`` of the scaled squared distance (KeOps computes self distances as zeros)."""
        za = self.scale_inputs(A).contiguous()
        zb = self.scale_inputs(B).contiguous()
        d2 = LazyTensor(za[:, None, :]).sqdist(LazyTensor(zb[None, :, :]))
        return self.keops_profile(d2, like=za)

    def extra_repr(self) -> str:
        """Hyperparameter values for the module's repr."""
        with torch.no_grad():
            ls = self.lengthscale
            ls_s = f"{float(ls):.4g}" if ls.ndim == 0 else str([round(float(v), 4) for v in ls])
            dims = "" if self.active_dims is None else f", active_dims={list(self.active_dims)}"
            return f"lengthscale={ls_s}, outputscale={float(self.outputscale):.4g}{dims}"
