"""The covariance-function protocol the GP models and estimators use."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
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
from ..linops.base import LinearOperator

if TYPE_CHECKING:  # pragma: no cover
    from .composite import Sum

__all__ = ["Kernel", "TileOperands", "describe_kernel"]

#: Per-point tile operands: tensors with one row per point (sliced with the tile) and
#: 0-d tensors (the same for every tile), nested in tuples for composite kernels.
TileOperands = tuple[Any, ...]


class Kernel(nn.Module, metaclass=abc.ABCMeta):
    """A covariance function ``k(x, x')`` with dense, diagonal and operator access.

    Implemented by :class:`~pnsolve.kernels.StationaryKernel` (RBF, Matérn, rational
    quadratic), the other families (periodic, linear, polynomial, constant, white,
    spectral mixture, cosine), their sums and products (``k1 + k2``, ``k1 * k2``,
    ``c * k``) and :class:`~pnsolve.kernels.GridInterpolation` (SKI). The GP models
    (``ExactGP``, ``IterGP``, LOVE) and the marginal-likelihood estimators only call the
    methods here, so any kernel with these methods works with them.

    **Matrix-free protocol.** Kernels with :attr:`matrix_free` true are what
    :class:`~pnsolve.kernels.KernelMatrix` takes on every backend. They implement

    * :meth:`_dense_graph`: the differentiable dense block;
    * :meth:`_diag` and :meth:`_paired`: self and paired values;
    * the tile protocol :meth:`tile_operands`, :meth:`fill_tile_`, :meth:`tile_scale`
      and :attr:`tile_buffers` (the ``"chunked"`` backend evaluates a whole expression
      in one pass over each tile);
    * :meth:`keops_formula` (the ``"keops"`` backend compiles one formula per
      expression).
    """

    #: Whether the kernel implements the matrix-free protocol (``KernelMatrix`` takes it).
    matrix_free: bool = False
    #: Scratch tiles (of the tile's shape) :meth:`fill_tile_` needs.
    tile_buffers: int = 0
    #: Whether :meth:`fill_tile_` may run for different tiles on several threads at once
    #: (CPU tile products split their rows over threads, ``tiled_matmat(parts=)``). True
    #: for every pnsolve kernel; a kernel whose tiles touch shared state (another
    #: library's global settings, a cache on ``self``) sets it ``False``, and a product of
    #: an expression holding such a kernel then runs on the calling thread alone.
    parallel_tiles: bool = True
    #: Whether :meth:`fill_tile_` writes only ones (a constant kernel): products skip it.
    tile_is_ones: bool = False
    #: Whether :meth:`fill_tile_` is exactly ``exp(a[0] b[0]ᵀ)`` with zeros in the exponent
    #: on the self pairs (RBF, periodic): a product of such kernels is one GEMM of the
    #: concatenated operands and one ``exp``.
    tile_exp: bool = False
    #: Whether the tile is zero except on the self pairs, where it is one (white noise):
    #: a sum adds it to the self pairs' diagonal without filling a tile.
    tile_is_diagonal: bool = False
    #: Whether :meth:`keops_formula` exists (``backend="auto"`` picks KeOps only then).
    has_keops_formula: bool = False
    #: Whether ``k(x, x')`` depends on ``x − x'`` only (SKI's Toeplitz grid matrices need
    #: it; white noise, which depends on the points' identity, does not count).
    stationary: bool = False

    # ------------------------------------------------------------- validation
    def input_dims(self) -> tuple[int | None, int]:
        """``(exact, minimum)`` input dimension the kernel needs (``exact`` or ``None``).

        ``exact`` is the number of ARD lengthscales when the kernel reads every column;
        ``minimum`` is one more than the largest active dimension (``0``: any ``d``).
        """
        return None, 0

    def check_inputs(
        self, X1: object, X2: object | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Validate inputs ``(n1, d)`` and ``(n2, d)``; errors name the argument.

        Both must be 2-D, floating, finite, on one device with one dtype and the same
        ``d``, which must suit the kernel (:meth:`input_dims`).
        """
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
        exact, minimum = self.input_dims()
        if exact is not None and X.shape[1] != exact:
            raise ValueError(
                f"{name} has {X.shape[1]} input dimensions but the kernel has {exact} ARD "
                "lengthscales"
            )
        if X.shape[1] < minimum:
            raise ValueError(
                f"{name} has {X.shape[1]} input dimensions but the kernel's active_dims "
                f"reach column {minimum - 1}"
            )
        return check_finite(X, name)

    # ------------------------------------------------------------------ values
    @full_float32
    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        """Dense ``k(X1, X2)`` of shape ``(n1, n2)`` (``X2 = None`` means ``X1``).

        With ``X2 = None`` the self entries are exact self values (zero distances; a
        :class:`~pnsolve.kernels.White` term contributes only there).
        """
        X1, X2 = self.check_inputs(X1, X2)
        return self._dense(X1, X2)

    @full_float32
    def diag(self, X: torch.Tensor) -> torch.Tensor:
        """``k(x_i, x_i)`` for the rows of ``X`` ``(n, d)``; shape ``(n,)``."""
        X, _ = self.check_inputs(X)
        return self._diag(X)

    def _dense(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Unvalidated dense block; ``X2=None`` means ``X1`` with exact self entries.

        ``self_index[i] = j`` marks ``X1[i]`` as the same point as ``X2[j]`` (a row block
        of a symmetric matrix). Without autograd the block is built in place in one
        buffer (:func:`~pnsolve.kernels.backends.tiling.dense_block`), several times
        faster than the differentiable expression.
        """
        if self_index is None and self.matrix_free and not self._tracks_grad(X1, X2):
            from .backends.tiling import dense_block

            return dense_block(self, X1, X2)
        return self._dense_graph(X1, X2, self_index)

    def _tracks_grad(self, X1: torch.Tensor, X2: torch.Tensor | None) -> bool:
        """Whether a dense block must be differentiable."""
        if not torch.is_grad_enabled():
            return False
        tensors = [X1, *self.parameters()] + ([] if X2 is None else [X2])
        return any(t.requires_grad for t in tensors)

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        """Differentiable dense block (see :meth:`_dense`); matrix-free kernels implement it."""
        raise NotImplementedError(f"{type(self).__name__} has no differentiable dense block")

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        """Unvalidated, differentiable ``k(x_i, x_i)``, shape ``(n,)``."""
        raise NotImplementedError(f"{type(self).__name__} has no diagonal")

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        """Differentiable ``k(X1_i, X2_i)`` for rows of two *different* input sets, ``(m,)``.

        As in every cross-covariance, points of ``X1`` and ``X2`` are distinct points
        even where their values coincide (a white-noise term contributes zero).
        """
        raise NotImplementedError(f"{type(self).__name__} has no paired values")

    # --------------------------------------------------------- tile protocol
    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """Per-point operands of ``X`` ``(n, d)`` for :meth:`fill_tile_` (no autograd).

        ``left`` selects the row side of the tile (``True``) or the column side.
        """
        raise NotImplementedError(f"{type(self).__name__} has no tile protocol")

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """Write ``k(x_i, x'_j) / tile_scale`` into the tile ``s`` ``(r, c)`` in place.

        ``a`` and ``b`` are the tile's rows of :meth:`tile_operands` (left and right);
        ``diag`` is the offset of the tile diagonal whose entries are self pairs (exact
        zero distances, white noise), or ``None``; ``work`` holds :attr:`tile_buffers`
        scratch tiles of ``s``'s shape.
        """
        raise NotImplementedError(f"{type(self).__name__} has no tile protocol")

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """Factor applied to a whole product after the tiles, 0-d in ``like``'s dtype/device.

        Differentiable (the models' outputscale). Default one.
        """
        return torch.ones((), dtype=like.dtype, device=like.device)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``k(a, b) / tile_scale`` as a pykeops ``LazyTensor`` of shape ``(nA, nB)``.

        ``A`` ``(nA, d)`` and ``B`` ``(nB, d)`` are the inputs; ``self_offset`` marks row
        ``i`` of ``A`` as row ``i + self_offset`` of ``B`` (``None``: distinct points).
        Parameters other than the inputs must enter as pykeops parameters (a constant is
        compiled into the formula), so a new value reuses the compiled formula.
        """
        raise NotImplementedError(f"{type(self).__name__} has no KeOps formula")

    # ------------------------------------------------ random Fourier features
    #: Whether the kernel has random Fourier features (:meth:`spectral_projection`):
    #: the stationary families, the spectral mixture, cosine and constant kernels and
    #: sums, products and scalings of them.
    has_spectral_features: bool = False

    def spectral_width(self, input_dim: int) -> int:
        """Columns of the frozen base draws per feature, for inputs with ``input_dim`` columns."""
        raise NotImplementedError(f"{type(self).__name__} has no random Fourier features")

    def spectral_base(
        self,
        num_features: int,
        input_dim: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> torch.Tensor:
        """Frozen base draws ``(num_features, spectral_width(input_dim))`` from ``generator``.

        With the kernel's current parameters they give the features' frequencies and
        amplitudes (:meth:`spectral_projection`), so the same draws follow a
        hyperparameter step (and carry its gradient).
        """
        raise NotImplementedError(f"{type(self).__name__} has no random Fourier features")

    def spectral_projection(
        self, X: torch.Tensor, base: torch.Tensor, phases: torch.Tensor, num_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ω_jᵀx + b_j, a_j)`` for base rows ``j``: the features ``√(2 a_j / m) cos(·)``.

        ``X`` ``(n, d)``; ``base`` ``(r, w)`` rows of :meth:`spectral_base` (any subset of
        the ``num_features = m`` rows drawn); ``phases`` ``(r,)``. Returns the projection
        ``(n, r)`` and the amplitudes ``a`` (``(r,)`` or 0-d), differentiable in the
        kernel's parameters, with ``E[(2/m) Σ_j a_j cos(ω_jᵀx + b_j) cos(ω_jᵀx' + b_j)]
        = k(x, x')`` over the draws.
        """
        raise NotImplementedError(f"{type(self).__name__} has no random Fourier features")

    def spectral_state(self) -> tuple[float, ...]:
        """Values the base draws depend on beyond :meth:`spectral_projection` (default none).

        :class:`~pnsolve.kernels.RandomFourierFeatures` records them when it draws and
        refuses to evaluate after they changed (e.g. the rational quadratic's ``α``).
        """
        return ()

    # ---------------------------------------------------------------- algebra
    def __add__(self, other: object) -> Sum:
        from .composite import Sum

        if not isinstance(other, Kernel):
            return NotImplemented
        return Sum(self, other)

    def __mul__(self, other: object) -> Kernel:
        from .composite import Product
        from .scale import Scale

        if isinstance(other, Kernel):
            return Product(self, other)
        if isinstance(other, (int, float, torch.Tensor)) and not isinstance(other, bool):
            return Scale(self, other)
        return NotImplemented

    def __rmul__(self, other: object) -> Kernel:
        return self.__mul__(other)

    def to_sklearn(self) -> Any:
        """The kernel as a scikit-learn kernel (:func:`~pnsolve.kernels.to_sklearn`)."""
        from .sklearn_export import to_sklearn

        return to_sklearn(self)

    # ---------------------------------------------------------------- operator
    def linop(
        self,
        X1: torch.Tensor,
        X2: torch.Tensor | None = None,
        backend: str = "auto",
        **opts: Any,
    ) -> LinearOperator:
        """``k(X1, X2)`` as a matrix-free :class:`~pnsolve.kernels.KernelMatrix`, ``(n1, n2)``.

        See :class:`~pnsolve.kernels.KernelMatrix` for ``backend`` and ``opts``.
        """
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

        The gradient of the marginal-likelihood estimators' bilinear surrogate, without
        an ``n × n`` graph: one differentiable row block ``k(X_R, X)`` at a time (built
        with autograd, contracted with ``W``, differentiated and freed), memory
        ``O(rows · n)``. ``X`` receives a gradient too if it requires one.

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
                # self_index marks the self pairs (exact zero distances, white noise)
                index = torch.arange(r0, r1, device=X.device)
                K_block = self._dense(X[r0:r1], X, self_index=index)
                part = (torch.mm(K_block, W) * U[r0:r1]).sum()
                for acc, g in zip(grads, torch.autograd.grad(part, inputs, allow_unused=True)):
                    if g is not None:
                        acc += g
        if reduce is not None:
            reduce(grads)
        torch.autograd.backward(inputs, grads)  # leaves accumulate; a non-leaf X passes it on

    def bind(self, X: torch.Tensor) -> Kernel:
        """The kernel with every data-derived setting fixed by the training inputs ``X``.

        The models call it in ``fit`` so that the training operator, cross-covariances
        and predictions share one configuration. Kernels without such settings return
        themselves; :class:`~pnsolve.kernels.GridInterpolation` without ``grid_bounds``
        returns a copy whose grid covers ``X`` (sharing the base kernel's parameters).
        """
        return self


def rows_of(ops: Any, start: int, stop: int) -> Any:
    """Rows ``[start, stop)`` of nested tile operands (0-d tensors are kept whole)."""
    if isinstance(ops, tuple):
        return tuple(rows_of(o, start, stop) for o in ops)
    if isinstance(ops, torch.Tensor) and ops.ndim > 0:
        return ops[start:stop]
    return ops


def describe_kernel(kernel: object) -> str:
    """A one-line description for error messages: an expression's repr, else the class name."""
    text = repr(kernel) if isinstance(kernel, Kernel) else ""
    return text if text and "\n" not in text else type(kernel).__name__
