"""The kernel system ``K̂ = k(X, X) + σ² I`` with exact accounting of kernel entries."""

from __future__ import annotations

import copy

import torch

from .._core.validation import check_same_device, check_same_dtype, check_tensor
from ..kernels.backends import choose_backend
from ..kernels.backends.tiling import dense_block, tile_shape, tiled_matmat
from ..kernels.kernel import Kernel
from ..kernels.kernel_matrix import BACKENDS, KernelMatrix
from ..linops.base import LinearOperator

__all__ = ["KernelSystem"]


class KernelSystem(LinearOperator):
    """``K̂ = k(X, X) + σ² I`` as a counted, symmetric positive definite linear operator.

    A :class:`~pnsolve.linops.LinearOperator` (``system @ V``, ``matmat``, ``diagonal``,
    ``row_block``, ``column_block``, ``to_dense``), so every solver of pnsolve runs on
    it: :func:`pnsolve.cg`, the :class:`~pnsolve.ProbabilisticLinearSolver` (stopped by
    :class:`~pnsolve.stopping.EpochBudget`, say), a
    :class:`~pnsolve.preconditioners.PivotedCholesky` factorisation, and the kernel-system
    solvers of :mod:`pnsolve.iterative`. Every access, through the operator interface or
    the row and column accesses below, reports the kernel entries it costs in
    :attr:`entries` (the cost model of the hyperparameter-training literature: one
    *epoch* is every entry of ``K̂`` once, ``n²`` entries).

    ===============================================  ===========  ======================
    access                                           shape        entries counted
    ===============================================  ===========  ======================
    :meth:`matmul` ``(V)``, ``matmat``, ``@``          ``(n, k)``   ``n²``
    :meth:`rows` ``(idx, V)``                        ``(b, k)``   ``b·n``
    :meth:`columns` ``(idx, W)``                     ``(n, k)``   ``b·n``
    ``row_block(idx)``, ``column_block(idx)``        ``(b, n)``   ``b·n``
    :meth:`block` ``(idx)``                          ``(b, b)``   ``b²``
    ``diagonal()``                                   ``(n,)``     ``n``
    ===============================================  ===========  ======================

    (``column_block`` returns ``(n, b)``; ``to_dense()`` is one product with the
    identity, ``n²`` entries.) The count does not depend on ``k`` (the number of
    right-hand sides) nor on the backend: the dense backend evaluates ``K`` once and then
    reuses it, but is charged as if it recomputed the entries, so budgets mean the same
    at every size. :attr:`products` counts the full products ``K̂ V`` alone.

    Parameters
    ----------
    kernel
        A matrix-free kernel: any family of :mod:`pnsolve.kernels` or an expression of them.
        The system keeps a frozen, detached copy: it represents ``K̂`` at the
        hyperparameters current when it was built, whatever happens to ``kernel`` later.
    X
        Inputs, shape ``(n, d)``; fix the dtype and device of every output (detached).
    noise
        ``σ² > 0``: float or 0-d tensor (detached).
    backend
        Keyword-only. ``"dense"`` (form ``K`` once, lazily, at the first access),
        ``"chunked"`` (torch tiles, never an ``n × n`` object), ``"keops"`` (products
        through pykeops) or ``"auto"`` (dense when ``K`` needs at most 32 MiB, else
        keops on CUDA with pykeops, else chunked; the rule of
        :class:`~pnsolve.kernels.KernelMatrix`).

    Raises
    ------
    TypeError
        If ``kernel`` is not a stationary kernel, ``X`` is not a floating tensor or
        ``noise`` is not a number or a 0-d tensor.
    ValueError
        If ``X`` is not 2-D or holds NaN/Inf, ``noise`` is not positive and finite, or
        ``backend`` is unknown.

    Notes
    -----
    All accesses run under ``torch.no_grad()``: the solvers are not differentiated
    through (gradient estimators use the solutions as constants).

    Self-similarities are exact: ``K̂_ii = k(x_i, x_i) + σ²`` in every access, so
    :meth:`matmul`, :meth:`rows`, :meth:`columns` and :meth:`block` describe one matrix
    to rounding (this matters for Matérn-1/2 in float32, whose ``exp(−r)`` turns a
    rounding-level ``r² ≈ eps`` into an error of ``√eps``).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(50, 2, dtype=torch.float64, generator=g)
    >>> system = pn.iterative.KernelSystem(pn.kernels.RBF(lengthscale=0.5), X, 0.1)
    >>> _ = system.matmul(torch.ones(50, 3, dtype=torch.float64))
    >>> _ = system @ torch.ones(50, dtype=torch.float64)  # the LinearOperator interface
    >>> system.entries, system.epochs, system.products
    (5000, 2.0, 2)
    """

    def __init__(
        self,
        kernel: Kernel,
        X: torch.Tensor,
        noise: float | torch.Tensor,
        *,
        backend: str = "auto",
    ) -> None:
        if not isinstance(kernel, Kernel) or not kernel.matrix_free:
            raise TypeError(
                "kernel must be a matrix-free pnsolve.kernels.Kernel (a family of "
                f"pnsolve.kernels or their sums and products), got {type(kernel).__name__}"
            )
        X, _ = kernel.check_inputs(check_tensor(X, "X").detach())
        self._noise = _check_noise(noise)
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        n = X.shape[0]
        super().__init__((n, n), X.dtype, X.device, is_symmetric=True, is_psd=True)
        self._kernel = copy.deepcopy(kernel).requires_grad_(False)
        self._X = X
        if backend == "auto":
            backend = choose_backend(n, n, X.dtype, X.device, keops=kernel.has_keops_formula)
        #: The backend in use: ``"dense"``, ``"chunked"`` or ``"keops"``.
        self.backend: str = backend
        self._op = None if backend == "dense" else KernelMatrix(self._kernel, X, backend=backend)
        self._K: torch.Tensor | None = None
        self._self_diag: torch.Tensor | None = None
        self._tile = tile_shape(n, n, X.element_size(), device=X.device)
        self._entries = 0
        self._products = 0

    def __repr__(self) -> str:
        return (
            f"KernelSystem({type(self._kernel).__name__}, n={self.n}, noise={self._noise:.4g}, "
            f"dtype={self.dtype}, backend={self.backend!r}, epochs={self.epochs:.4g})"
        )

    # --------------------------------------------------------------- properties
    @property
    def n(self) -> int:
        """Number of data points (``K̂`` is ``n × n``)."""
        return self._X.shape[0]

    @property
    def X(self) -> torch.Tensor:
        """The (detached) inputs, shape ``(n, d)``."""
        return self._X

    @property
    def kernel(self) -> Kernel:
        """The frozen copy of the kernel that defines ``K``."""
        return self._kernel

    @property
    def noise(self) -> float:
        """``σ²``."""
        return self._noise

    @property
    def entries(self) -> int:
        """Kernel entries evaluated (charged) so far."""
        return self._entries

    @property
    def epochs(self) -> float:
        """``entries / n²``: how many times every entry of ``K̂`` has been paid for."""
        return self._entries / (self.n * self.n)

    @property
    def products(self) -> int:
        """Full products ``K̂ V`` so far (:meth:`matmul`, ``matmat``, ``@``; any ``k``)."""
        return self._products

    # ----------------------------------------------------------------- accesses
    @torch.no_grad()
    def matmul(self, V: torch.Tensor) -> torch.Tensor:
        """``K̂ V`` (``n²`` entries).

        Parameters
        ----------
        V
            Shape ``(n, k)``.

        Returns
        -------
        torch.Tensor
            Shape ``(n, k)``.
        """
        V = self._check_matrix(V, "V")
        self._entries += self.n * self.n
        self._products += 1
        KV = self._dense() @ V if self._op is None else self._op.matmat(V)
        return KV.add_(V, alpha=self._noise)

    @torch.no_grad()
    def rows(self, idx: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """``K̂[idx, :] V`` (``b·n`` entries), the minibatch product of SGD.

        Parameters
        ----------
        idx
            Distinct row indices, integer tensor of shape ``(b,)``.
        V
            Shape ``(n, k)``.

        Returns
        -------
        torch.Tensor
            Shape ``(b, k)``.
        """
        idx = self._check_index(idx)
        V = self._check_matrix(V, "V")
        self._entries += idx.numel() * self.n
        if self._op is None:
            out = self._dense()[idx] @ V
        else:
            rest = self._complement(idx)
            out = tiled_matmat(self._kernel, self._X[idx], self._X[rest], V[rest], self._tile)
            out.add_(dense_block(self._kernel, self._X[idx], None) @ V[idx])
        return out.add_(V[idx], alpha=self._noise)

    @torch.no_grad()
    def columns(self, idx: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """``K̂[:, idx] W`` (``b·n`` entries), the residual update of alternating projections.

        Parameters
        ----------
        idx, W
            Distinct column indices, integer tensor of shape ``(b,)``, and the ``(b, k)``
            block they multiply.

        Returns
        -------
        torch.Tensor
            Shape ``(n, k)`` (on the dense backend column-contiguous: the transpose of a
            contiguous ``(k, n)`` tensor).
        """
        idx = self._check_index(idx)
        W = self._check_matrix(W, "W", rows=idx.numel())
        self._entries += idx.numel() * self.n
        if self._op is None:
            K = self._dense()
            lo = int(idx[0])
            if bool((idx == torch.arange(lo, lo + idx.numel(), device=idx.device)).all()):
                # contiguous block (alternating projections): a view, no b×n copy
                rows = K.narrow(0, lo, idx.numel())
            else:
                rows = K[idx]
            # K is exactly symmetric, so K[:, I] W = (Wᵀ K[I, :])ᵀ: one GEMM over contiguous
            # rows, 1.5× faster than the skinny product with strided columns (measured);
            # the result is a transposed view (column-contiguous), which callers that keep
            # their residual in the same layout update without a copy
            out = torch.mm(W.mT, rows).mT
        else:
            rest = self._complement(idx)
            out = torch.empty(self.n, W.shape[1], dtype=self.dtype, device=self.device)
            out[rest] = tiled_matmat(self._kernel, self._X[rest], self._X[idx], W, self._tile)
            out[idx] = dense_block(self._kernel, self._X[idx], None) @ W
        out[idx] += self._noise * W
        return out

    @torch.no_grad()
    def block(self, idx: torch.Tensor) -> torch.Tensor:
        """Dense principal block ``K̂[idx, idx]`` (``b²`` entries), exactly symmetric.

        Parameters
        ----------
        idx
            Distinct indices, integer tensor of shape ``(b,)``.

        Returns
        -------
        torch.Tensor
            Shape ``(b, b)``.
        """
        idx = self._check_index(idx)
        self._entries += idx.numel() ** 2
        if self._op is None:
            out = self._dense()[idx][:, idx]
        else:
            out = dense_block(self._kernel, self._X[idx], None)
        out.diagonal().add_(self._noise)
        return out

    def as_linop(self) -> LinearOperator:
        """The system itself (it is a :class:`~pnsolve.linops.LinearOperator`).

        Kept for code written when it was not.
        """
        return self

    # -------------------------------------------------- LinearOperator interface
    def _to(self, dtype: torch.dtype) -> KernelSystem:
        """The same kernel, noise and backend with products in ``dtype``."""
        noise = self._noise.to(dtype) if isinstance(self._noise, torch.Tensor) else self._noise
        return KernelSystem(self._kernel, self._X.to(dtype), noise, backend=self.backend)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.matmul(X)  # through the public method: counted like it

    @torch.no_grad()
    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        """Dense rows ``K̂[rows, :]`` (``b·n`` entries), shape ``(b, n)``."""
        idx = self._check_index(rows)
        self._entries += idx.numel() * self.n
        if self._op is None:
            out = self._dense()[idx]
        else:
            out = dense_block(self._kernel, self._X[idx], self._X)
        out[torch.arange(idx.numel(), device=self.device), idx] = self._self_values()[idx]
        return out

    @torch.no_grad()
    def _diagonal(self) -> torch.Tensor:
        """``diag K̂ = k(x_i, x_i) + σ²`` (``n`` entries); shape ``(n,)``."""
        self._entries += self.n
        return self._self_values().clone()

    # ------------------------------------------------------------------ helpers
    def _dense(self) -> torch.Tensor:
        """The noise-free ``K`` (dense backend only), formed at the first use."""
        if self._K is None:
            self._K = dense_block(self._kernel, self._X, None)
        return self._K

    def _self_values(self) -> torch.Tensor:
        """``k(x_i, x_i) + σ²`` for every point (computed once; the kernel is a frozen copy)."""
        if self._self_diag is None:
            self._self_diag = self._kernel._diag(self._X) + self._noise
        return self._self_diag

    def _complement(self, idx: torch.Tensor) -> torch.Tensor:
        keep = torch.ones(self.n, dtype=torch.bool, device=self.device)
        keep[idx] = False
        return keep.nonzero().squeeze(-1)

    def _check_matrix(self, V: object, name: str, rows: int | None = None) -> torch.Tensor:
        V = check_tensor(V, name)
        rows = self.n if rows is None else rows
        if V.ndim != 2 or V.shape[0] != rows:
            raise ValueError(f"{name} must have shape ({rows}, k), got {tuple(V.shape)}")
        check_same_dtype(V, self.dtype, name, "X")
        check_same_device(V, self.device, name, "X")
        return V

    def _check_index(self, idx: object) -> torch.Tensor:
        idx = check_tensor(idx, "idx")
        if idx.ndim != 1 or idx.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"idx must be a 1-D integer tensor, got shape {tuple(idx.shape)} and dtype "
                f"{idx.dtype}"
            )
        check_same_device(idx, self.device, "idx", "X")
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.n):
            raise IndexError(f"idx must hold indices in [0, {self.n}), got out-of-range values")
        return idx.long()


def _check_noise(noise: object) -> float:
    if isinstance(noise, torch.Tensor):
        if noise.ndim != 0:
            raise TypeError(
                f"noise must be a float or a 0-d tensor, got shape {tuple(noise.shape)}"
            )
        value = float(noise.detach())
    elif isinstance(noise, int | float) and not isinstance(noise, bool):
        value = float(noise)
    else:
        raise TypeError(f"noise must be a float or a 0-d tensor, got {type(noise).__name__}")
    if not (value > 0 and value < float("inf")):
        raise ValueError(f"noise (σ²) must be positive and finite, got {value}")
    return value
