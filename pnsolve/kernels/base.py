"""Abstract stationary kernel ``k(x, x') = outputscale · κ(‖x − x'‖² / lengthscale²)``."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from .._core.precision import full_float32
from .._core.validation import (
    check_finite,
    check_real_dtype,
    check_same_device,
    check_same_dtype,
    check_tensor,
)
from ._distance import scaled_sqdist
from .kernel import Kernel
from .positive import inv_softplus, one_device, positive_value, softplus

if TYPE_CHECKING:  # pragma: no cover
    from .kernel_matrix import KernelMatrix

__all__ = ["StationaryKernel", "inv_softplus", "softplus"]


class StationaryKernel(Kernel):
    """Base class of stationary kernels with softplus-positive hyperparameters.

    ``k(x, x') = outputscale · κ(r²)`` with ``r² = Σ_j (x_j − x'_j)² / ℓ_j²``. Subclasses
    implement the *profile* ``κ`` three ways: :meth:`profile` (differentiable torch),
    :meth:`profile_` (in place on a tile buffer, no autograd) and :meth:`keops_profile`
    (a pykeops ``LazyTensor`` formula), plus ``_spectral_draws`` (behind
    :meth:`sample_spectral_base`) for random Fourier features.

    Parameters
    ----------
    lengthscale
        Positive float, or a tensor of shape ``()`` or ``(d,)`` (ARD).
    outputscale
        Positive float or 0-d tensor.
    ard_dims
        If given, a scalar ``lengthscale`` is broadcast to ``d = ard_dims`` dimensions.

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

    def __init__(
        self,
        lengthscale: float | torch.Tensor = 1.0,
        outputscale: float | torch.Tensor = 1.0,
        *,
        ard_dims: int | None = None,
    ) -> None:
        super().__init__()
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
        v = positive_value(value, name).to(raw.dtype)
        if v.shape != raw.shape and v.ndim != 0:
            raise ValueError(f"{name} must have shape {tuple(raw.shape)}, got {tuple(v.shape)}")
        with torch.no_grad():
            raw.copy_(inv_softplus(v).expand_as(raw))

    # ------------------------------------------------------------ for backends
    def scale_inputs(self, X: torch.Tensor) -> torch.Tensor:
        """``X / lengthscale`` in ``X``'s dtype/device (differentiable), shape ``(n, d)``."""
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

    def sample_spectral_base(
        self,
        num_features: int,
        input_dim: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> torch.Tensor:
        """Frozen base frequencies ``ε`` of shape ``(num_features, input_dim)``.

        The spectral frequencies for the current hyperparameters are ``ε / lengthscale``.
        Draws from the kernel's spectral density for unit lengthscale, through
        :meth:`_spectral_draws` (what a subclass implements): made on ``generator``'s
        device, returned on ``device`` (:mod:`pnsolve._core.random`).
        """
        return self._spectral_draws((num_features, input_dim), generator, dtype, device)

    def spectral_state(self) -> tuple[float, ...]:
        """Values the spectral draws depend on besides the lengthscale (default none).

        :class:`~pnsolve.kernels.RandomFourierFeatures` records them when it draws and
        refuses to evaluate after they changed (e.g. the rational quadratic's ``α``).
        """
        return ()

    @abc.abstractmethod
    def _spectral_draws(
        self, shape: tuple[int, int], generator: torch.Generator, dtype: torch.dtype, device
    ) -> torch.Tensor:
        """Draws of shape ``shape`` from the spectral density for unit lengthscale."""

    # ----------------------------------------------------------------- public
    def check_inputs(
        self, X1: object, X2: object | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Validate inputs: 2-D floating, finite, matching ``d``, dtype and device."""
        X1 = self._check_one(X1, "X1")
        if X2 is None:
            return X1, None
        X2 = self._check_one(X2, "X2")
        if X2.shape[1] != X1.shape[1]:
            raise ValueError(f"X2 has {X2.shape[1]} input dimensions but X1 has {X1.shape[1]}")
        check_same_dtype(X2, X1.dtype, "X2", "X1")
        check_same_device(X2, X1.device, "X2", "X1")
        return X1, X2

    def _check_one(self, X: object, name: str) -> torch.Tensor:
        X = check_tensor(X, name)
        if X.ndim != 2:
            raise ValueError(f"{name} must have shape (n, d), got {tuple(X.shape)}")
        check_real_dtype(X.dtype, name)
        if not X.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {X.dtype}")
        ard = self.ard_dims
        if ard is not None and X.shape[1] != ard:
            raise ValueError(
                f"{name} has {X.shape[1]} input dimensions but the kernel has {ard} ARD "
                "lengthscales"
            )
        return check_finite(X, name)

    @full_float32
    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        """Dense kernel matrix.

        Parameters
        ----------
        X1
            Shape ``(n1, d)``.
        X2
            Shape ``(n2, d)``; ``None`` means ``X1`` (then the diagonal distances are exact zeros).

        Returns
        -------
        torch.Tensor
            ``K(X1, X2)`` of shape ``(n1, n2)`` in ``X1``'s dtype and device.
        """
        X1, X2 = self.check_inputs(X1, X2)
        return self._dense(X1, X2)

    def _dense(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Unvalidated dense block; ``X2=None`` means ``X1`` with exact-zero self distances.

        Without autograd (grad mode off, or nothing requiring grad) the block is built in
        place in one buffer (:func:`~pnsolve.linops._kernel_backends.tiling.dense_block`),
        several times faster than the differentiable expression.
        """
        if self_index is None and not self._tracks_grad(X1, X2):
            from .backends.tiling import dense_block

            return dense_block(self, X1, X2)
        Z1 = self.scale_inputs(X1)
        if X2 is None:
            Z2 = Z1
            if self_index is None:
                self_index = torch.arange(X1.shape[0], device=X1.device)
        else:
            Z2 = self.scale_inputs(X2)
        r2 = scaled_sqdist(Z1, Z2, self_index)
        return self.outputscale_like(X1) * self.profile(r2)

    def _tracks_grad(self, X1: torch.Tensor, X2: torch.Tensor | None) -> bool:
        """Whether a dense block must be differentiable."""
        if not torch.is_grad_enabled():
            return False
        tensors = [X1, *self.parameters()] + ([] if X2 is None else [X2])
        return any(t.requires_grad for t in tensors)

    @full_float32
    def diag(self, X: torch.Tensor) -> torch.Tensor:
        """``k(x_i, x_i) = outputscale`` for each row of ``X``; shape ``(n,)``."""
        X, _ = self.check_inputs(X)
        return self.outputscale_like(X).expand(X.shape[0])

    def linop(
        self,
        X1: torch.Tensor,
        X2: torch.Tensor | None = None,
        backend: str = "auto",
        **opts: Any,
    ) -> KernelMatrix:
        """Matrix-free :class:`~pnsolve.kernels.KernelMatrix` (see there for ``opts``)."""
        from .kernel_matrix import KernelMatrix

        return KernelMatrix(self, X1, X2, backend=backend, **opts)

    @full_float32
    def bilinear_backward(
        self,
        X: torch.Tensor,
        U: torch.Tensor,
        W: torch.Tensor,
        *,
        rows: int,
        row_range: tuple[int, int] | None = None,
        reduce: Callable[[list[torch.Tensor]], None] | None = None,
    ) -> None:
        """Add ``∇ Σ_c U[:, c]ᵀ k(X, X) W[:, c]`` to the ``.grad`` of the leaves.

        One differentiable row block ``k(X_R, X)`` at a time (built with autograd,
        contracted with ``W``, differentiated and freed): memory ``O(rows · n)``, never
        an ``n × n`` graph. ``X`` receives a gradient too if it requires one.

        Parameters
        ----------
        X
            Inputs, shape ``(n, d)``.
        U, W
            Detached blocks of shape ``(n, k)``.
        rows
            Rows per differentiable block (≥ 1).
        row_range
            Only the rows ``[start, stop)`` of the sum (default: all ``n``).
        reduce
            Called with the gradients (the kernel's parameters that require one, in
            ``parameters()`` order, then ``X`` if it requires one) before they are
            accumulated; it may change them in place (the ``"distributed"`` backend
            sums the ranks' row ranges with it).
        """
        n = X.shape[0]
        start, stop = (0, n) if row_range is None else row_range
        U, W = U.detach(), W.detach()
        inputs: list[torch.Tensor] = [p for p in self.parameters() if p.requires_grad]
        if X.requires_grad:
            inputs.append(X)
        if not inputs:
            return
        grads = [torch.zeros_like(t) for t in inputs]
        with torch.enable_grad():
            for r0 in range(start, stop, rows):
                r1 = min(stop, r0 + rows)
                # self_index marks the diagonal entries as exact zero distances (their
                # gradient is then exactly zero, as in the dense kernel matrix)
                index = torch.arange(r0, r1, device=X.device)
                K_block = self._dense(X[r0:r1], X, self_index=index)
                part = (torch.mm(K_block, W) * U[r0:r1]).sum()
                for acc, g in zip(grads, torch.autograd.grad(part, inputs, allow_unused=True)):
                    if g is not None:
                        acc += g
        if reduce is not None:
            reduce(grads)
        torch.autograd.backward(inputs, grads)  # leaves accumulate; a non-leaf X passes it on

    def extra_repr(self) -> str:
        """Hyperparameter values for the module's repr."""
        with torch.no_grad():
            ls = self.lengthscale
            ls_s = f"{float(ls):.4g}" if ls.ndim == 0 else str([round(float(v), 4) for v in ls])
            return f"lengthscale={ls_s}, outputscale={float(self.outputscale):.4g}"
