"""Matrix-free kernel matrices ``K(X1, X2)``."""

from __future__ import annotations

import torch

from ..linops.base import LinearOperator
from .backends import (
    ChunkedBackend,
    DenseBackend,
    DistributedBackend,
    KeOpsBackend,
    choose_backend,
)
from .backends.tiling import DEFAULT_MAX_MEMORY
from .kernel import Kernel

__all__ = ["BACKENDS", "KernelMatrix"]

#: The ``backend`` names a :class:`KernelMatrix` accepts.
BACKENDS = ("auto", "dense", "chunked", "keops", "distributed")


class KernelMatrix(LinearOperator):
    """The kernel matrix ``K_ij = k(X1_i, X2_j)`` as a linear operator.

    Parameters
    ----------
    kernel
        A matrix-free kernel (:attr:`~pnsolve.kernels.Kernel.matrix_free`): every family
        in :mod:`pnsolve.kernels` and their sums, products and scalings. Its current
        hyperparameters are used at every product, and autograd reaches them.
    X1
        Inputs of shape ``(n1, d)``; they fix the operator's dtype and device.
    X2
        Inputs of shape ``(n2, d)``; ``None`` means ``X1``, and then the operator is
        flagged symmetric and PSD and self distances are exact zeros.
    backend
        ``"dense"`` (form ``K``, cached outside autograd while parameters and inputs are
        unchanged), ``"chunked"`` (torch tiles in a reused buffer; never an ``n1 × n2``
        object, backward recomputes tiles), ``"keops"`` (pykeops ``LazyTensor``, the GPU
        backend) or ``"auto"``:

        * ``"dense"`` if ``n1 · n2 · itemsize ≤ 32 MiB``,
        * else ``"keops"`` if ``X1`` is on CUDA and pykeops imports,
        * else ``"chunked"``.

        The choice is logged (INFO, logger ``pnsolve.linops``) and stored in
        :attr:`backend`. ``"auto"`` never picks ``"distributed"``: inside an initialised
        ``torch.distributed`` default process group, ``"distributed"`` partitions the
        rows of every product over the ranks (each rank's block with the rule above; see
        the "Scaling out" docs page); inputs, right-hand sides and results are the same tensors on
        every rank.
    max_memory
        ``"chunked"`` (also a distributed rank's chunked block): cap in bytes on the tile
        buffers (default 256 MiB).
    tile
        ``"chunked"`` only: requested tile ``(rows, cols)`` (default ``(512, 512)`` on a
        CPU, ``(4096, 8192)`` on a CUDA device), shrunk to respect ``max_memory``.
    local_backend
        ``"distributed"`` only: the backend of each rank's row block (``"auto"``: the
        rule above applied to the block; or ``"dense"``, ``"chunked"``, ``"keops"``).

    Raises
    ------
    TypeError
        If ``kernel`` is not a matrix-free kernel, or ``X1``/``X2`` are not floating tensors.
    ValueError
        For a bad shape, NaN/Inf inputs, an unknown ``backend`` or a bad ``max_memory``/``tile``.
    ImportError
        For ``backend="keops"`` without pykeops.
    RuntimeError
        For ``backend="distributed"`` without an initialised default process group.

    Notes
    -----
    Autograd with respect to the kernel's parameters, ``X1``, ``X2`` and the right-hand
    side works in every backend. In the dense backend the graph holds ``K`` (``n1·n2``
    memory per product); wrap solver loops in ``torch.no_grad()`` unless you
    differentiate through them.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.randn(100, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> K = pn.kernels.RBF(lengthscale=0.5).linop(X, backend="chunked")
    >>> (K @ torch.ones(100, dtype=torch.float64)).shape
    torch.Size([100])
    """

    def __init__(
        self,
        kernel: Kernel,
        X1: torch.Tensor,
        X2: torch.Tensor | None = None,
        backend: str = "auto",
        *,
        max_memory: int = DEFAULT_MAX_MEMORY,
        tile: tuple[int, int] | None = None,
        local_backend: str = "auto",
    ) -> None:
        if not isinstance(kernel, Kernel) or not kernel.matrix_free:
            raise TypeError(
                "kernel must be a matrix-free pnsolve.kernels.Kernel (a family of "
                f"pnsolve.kernels or their sums and products), got {type(kernel).__name__}"
            )
        X1, X2 = kernel.check_inputs(X1, X2)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if local_backend != "auto" and backend != "distributed":
            raise ValueError(
                f'local_backend applies to backend="distributed" only, got {local_backend!r} '
                f"with backend={backend!r}"
            )
        if isinstance(max_memory, bool) or not isinstance(max_memory, int) or max_memory < 1:
            raise ValueError(f"max_memory must be a positive int (bytes), got {max_memory!r}")
        if tile is not None and (
            len(tile) != 2 or any(not isinstance(t, int) or t < 1 for t in tile)
        ):
            raise ValueError(f"tile must be a pair of positive ints, got {tile!r}")
        sym = X2 is None
        n2 = X1.shape[0] if X2 is None else X2.shape[0]
        super().__init__((X1.shape[0], n2), X1.dtype, X1.device, is_symmetric=sym, is_psd=sym)
        self.kernel = kernel
        self.X1 = X1
        self.X2 = X2
        self._max_memory, self._tile, self._local_backend = max_memory, tile, local_backend
        if backend == "auto":
            backend = choose_backend(
                X1.shape[0], n2, X1.dtype, X1.device, keops=kernel.has_keops_formula
            )
        #: The backend in use: ``"dense"``, ``"chunked"``, ``"keops"`` or ``"distributed"``.
        self.backend: str = backend
        self._impl: DenseBackend | ChunkedBackend | KeOpsBackend | DistributedBackend
        if backend == "dense":
            self._impl = DenseBackend(kernel, X1, X2)
        elif backend == "chunked":
            self._impl = ChunkedBackend(kernel, X1, X2, max_memory=max_memory, tile=tile)
        elif backend == "keops":
            self._impl = KeOpsBackend(kernel, X1, X2)
        else:
            self._impl = DistributedBackend(
                kernel, X1, X2, local=local_backend, max_memory=max_memory, tile=tile
            )

    @property
    def local_backend(self) -> str | None:
        """``"distributed"``: the backend of this rank's row block; otherwise ``None``."""
        return self._impl.local_backend if isinstance(self._impl, DistributedBackend) else None

    def __repr__(self) -> str:
        return (
            f"KernelMatrix({type(self.kernel).__name__}, shape={self.shape}, "
            f"dtype={self.dtype}, backend={self.backend!r})"
        )

    # ----------------------------------------------------------------- protocol
    def _to(self, dtype: torch.dtype) -> KernelMatrix:
        """The same kernel, inputs and backend with tiles evaluated in ``dtype``."""
        X2 = None if self.X2 is None else self.X2.to(dtype)
        return KernelMatrix(
            self.kernel, self.X1.to(dtype), X2, self.backend, max_memory=self._max_memory,
            tile=self._tile, local_backend=self._local_backend,
        )  # fmt: skip

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._impl.matmat(X)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._impl.rmatmat(X)

    def _diagonal(self) -> torch.Tensor:
        """``k(X1_i, X2_i)`` for ``i < min(n1, n2)`` (self values when ``X2`` is ``X1``)."""
        if self.X2 is None:
            return self.kernel._diag(self.X1).clone()
        m = min(self.shape)
        return self.kernel._paired(self.X1[:m], self.X2[:m])

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        """Dense rows ``K(X1[rows], X2)``; only those rows are formed."""
        if self.X2 is None:
            return self.kernel._dense(self.X1[rows], self.X1, self_index=rows)
        return self.kernel._dense(self.X1[rows], self.X2)

    def to_dense(self) -> torch.Tensor:
        """The full ``(n1, n2)`` matrix (explicit densification)."""
        return self.kernel._dense(self.X1, self.X2)

    # ------------------------------------------------------------------ algebra
    def add_diagonal(self, noise: float | torch.Tensor) -> LinearOperator:
        """``K + noise · I`` as a :class:`~pnsolve.linops.Sum` (square operators only).

        Parameters
        ----------
        noise
            Python number or 0-d tensor (a tensor keeps autograd to it).
        """
        if not self.is_square:
            raise ValueError(f"add_diagonal needs a square operator, got shape {self.shape}")
        from ..linops.scaled_identity import ScaledIdentity

        return self + ScaledIdentity(self.shape[0], noise, dtype=self.dtype, device=self.device)
