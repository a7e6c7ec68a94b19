"""The ``LinearOperator`` protocol.

A linear operator is anything that can be multiplied with a tensor: ``A @ x`` for
``x`` of shape ``(n,)`` or ``(n, k)``. Subclasses implement :meth:`_matmat` (and,
where they can, :meth:`_diagonal`, :meth:`_row_block`, :meth:`_rmatmat`); the
base class validates arguments once, so every operator rejects bad input the
same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .._core.errors import MissingStructureError
from .._core.precision import full_float32
from .._core.validation import check_same_device, check_same_dtype, check_tensor

__all__ = ["LinearOperator", "RowIndex"]

#: Rows addressed by :meth:`LinearOperator.row_block`: a slice, a sequence of ints or a 1-D tensor.
RowIndex = slice | Sequence[int] | torch.Tensor


class LinearOperator:
    """Abstract linear map ``A: R^n -> R^m`` acting on torch tensors.

    Parameters
    ----------
    shape
        ``(m, n)``.
    dtype
        Floating dtype of the operator's products.
    device
        Device of the operator's products.
    is_symmetric
        Whether ``A = Aᵀ`` (structural knowledge, not checked).
    is_psd
        Whether ``A`` is positive semi-definite (structural knowledge, not checked).

    Notes
    -----
    Products ``A @ x`` accept ``x`` of shape ``(n,)`` (returning ``(m,)``) or
    ``(n, k)`` (returning ``(m, k)``); ``x`` must share the operator's dtype and
    device. Inputs are never modified in place.
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        device: torch.device | str,
        *,
        is_symmetric: bool = False,
        is_psd: bool = False,
    ) -> None:
        if len(shape) != 2 or any(int(s) < 0 for s in shape):
            raise ValueError(f"shape must be a pair of non-negative ints, got {shape}")
        if not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point dtype, got {dtype}")
        self._shape = (int(shape[0]), int(shape[1]))
        self._dtype = dtype
        self._device = torch.device(device)
        self._is_symmetric = bool(is_symmetric)
        self._is_psd = bool(is_psd) and bool(is_symmetric)
        if is_symmetric and self._shape[0] != self._shape[1]:
            raise ValueError(f"a symmetric operator must be square, got shape {self._shape}")

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> tuple[int, int]:
        """``(m, n)``."""
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        """Dtype of products with this operator."""
        return self._dtype

    @property
    def device(self) -> torch.device:
        """Device of products with this operator."""
        return self._device

    @property
    def is_symmetric(self) -> bool:
        """Whether the operator is known to be symmetric."""
        return self._is_symmetric

    @property
    def is_psd(self) -> bool:
        """Whether the operator is known to be symmetric positive semi-definite."""
        return self._is_psd

    @property
    def is_square(self) -> bool:
        """Whether ``m == n``."""
        return self._shape[0] == self._shape[1]

    def __repr__(self) -> str:
        flags = [f for f, on in (("symmetric", self.is_symmetric), ("psd", self.is_psd)) if on]
        extra = f", {', '.join(flags)}" if flags else ""
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype}{extra})"

    # ------------------------------------------------------------- to implement
    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        """Return ``A @ X`` for validated ``X`` of shape ``(n, k)``; shape ``(m, k)``."""
        raise MissingStructureError(f"{type(self).__name__} does not implement products")

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        """Return ``Aᵀ @ X`` for validated ``X`` of shape ``(m, k)``; shape ``(n, k)``."""
        if self.is_symmetric:
            return self._matmat(X)
        raise MissingStructureError(
            f"{type(self).__name__} has no transposed product; call to_dense() if you "
            "really want the dense matrix"
        )

    def _diagonal(self) -> torch.Tensor:
        raise MissingStructureError(
            f"{type(self).__name__} has no structured diagonal; call to_dense().diagonal() "
            "if an n×n matrix is acceptable, or estimate it stochastically"
        )

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        raise MissingStructureError(
            f"{type(self).__name__} has no structured row access; call to_dense()[rows] "
            "if an n×n matrix is acceptable"
        )

    # ------------------------------------------------------------------- public
    @full_float32
    def matmat(self, X: torch.Tensor) -> torch.Tensor:
        """Product with a matrix.

        Parameters
        ----------
        X
            Tensor of shape ``(n, k)``.

        Returns
        -------
        torch.Tensor
            ``A @ X`` of shape ``(m, k)``.
        """
        X = self._check_operand(X, self.shape[1], "X")
        if X.ndim != 2:
            raise ValueError(f"X must have shape (n, k), got {tuple(X.shape)}")
        return self._matmat(X)

    @full_float32
    def matvec(self, x: torch.Tensor) -> torch.Tensor:
        """Product with a vector ``x`` of shape ``(n,)``; returns shape ``(m,)``."""
        x = self._check_operand(x, self.shape[1], "x")
        if x.ndim != 1:
            raise ValueError(f"x must have shape (n,), got {tuple(x.shape)}")
        return self._matmat(x.unsqueeze(-1)).squeeze(-1)

    @full_float32
    def rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        """Transposed product ``Aᵀ @ X`` for ``X`` of shape ``(m,)`` or ``(m, k)``."""
        X = self._check_operand(X, self.shape[0], "X")
        if X.ndim == 1:
            return self._rmatmat(X.unsqueeze(-1)).squeeze(-1)
        return self._rmatmat(X)

    @full_float32
    def __matmul__(self, other: torch.Tensor) -> torch.Tensor:
        if isinstance(other, LinearOperator):
            from .product import Product

            return Product(self, other)
        other = self._check_operand(other, self.shape[1], "the right operand")
        if other.ndim == 1:
            return self._matmat(other.unsqueeze(-1)).squeeze(-1)
        return self._matmat(other)

    def __rmatmul__(self, other: torch.Tensor) -> torch.Tensor:
        # x @ A = (Aᵀ xᵀ)ᵀ
        other = check_tensor(other, "the left operand")
        if other.ndim == 1:
            return self.rmatmat(other)
        if other.ndim != 2:
            raise ValueError(
                f"the left operand must have shape (m,) or (k, m), got {tuple(other.shape)}"
            )
        return self.rmatmat(other.mT).mT

    @property
    def T(self) -> LinearOperator:
        """The transposed operator ``Aᵀ``."""
        if self.is_symmetric:
            return self
        from .transpose import Transpose

        return Transpose(self)

    def diagonal(self) -> torch.Tensor:
        """The main diagonal, shape ``(min(m, n),)``.

        Raises
        ------
        MissingStructureError
            If the operator has no structured diagonal (nothing is densified).
        """
        return self._diagonal()

    @full_float32
    def row_block(self, rows: RowIndex) -> torch.Tensor:
        """Dense rows ``A[rows, :]`` of shape ``(len(rows), n)``.

        Used by row-action solvers (alternating projections, SGD) and by pivoted
        Cholesky (columns of a symmetric operator are its rows). Only the requested
        rows are formed.

        Parameters
        ----------
        rows
            A slice, a sequence of row indices or a 1-D integer tensor.
        """
        idx = self._row_index(rows)
        return self._row_block(idx)

    @full_float32
    def column_block(self, cols: RowIndex) -> torch.Tensor:
        """Dense columns ``A[:, cols]`` of shape ``(m, len(cols))``.

        Available for symmetric operators (as rows transposed) and for operators
        that implement it; computed as ``A @ E_cols`` otherwise, which costs
        ``len(cols)`` products but never forms the whole matrix.
        """
        if self.is_symmetric:
            return self.row_block(cols).mT
        idx = self._row_index(cols, self.shape[1])
        E = torch.zeros(self.shape[1], idx.numel(), dtype=self.dtype, device=self.device)
        E[idx, torch.arange(idx.numel(), device=self.device)] = 1
        return self._matmat(E)

    @full_float32
    def to_dense(self) -> torch.Tensor:
        """The full matrix, shape ``(m, n)``: an explicit, user-requested densification."""
        eye = torch.eye(self.shape[1], dtype=self.dtype, device=self.device)
        return self._matmat(eye)

    def trace(self) -> torch.Tensor:
        """Trace of a square operator (from its structured diagonal)."""
        if not self.is_square:
            raise ValueError(f"trace needs a square operator, got shape {self.shape}")
        return self.diagonal().sum()

    def to(self, dtype: torch.dtype) -> LinearOperator:
        """The same operator with its products computed in ``dtype``.

        Mixed-precision solves (``pn.cg(..., precision="mixed")``) multiply with
        ``A.to(torch.float32)`` while their recurrences stay in float64. Stored
        tensors are converted once (a dense ``A`` gets a float32 copy, half its
        memory again); matrix-free operators convert their inputs (a kernel matrix
        evaluates its tiles in ``dtype``). Structural flags carry over unchecked.

        Parameters
        ----------
        dtype
            A floating dtype; the operator itself is returned when it already has it.

        Raises
        ------
        TypeError
            If ``dtype`` is not a floating dtype.
        MissingStructureError
            If the operator cannot change the dtype of its products (e.g. a
            :class:`~pnsolve.linops.Closure`, whose function fixes it).
        """
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        if dtype == self.dtype:
            return self
        return self._to(dtype)

    def _to(self, dtype: torch.dtype) -> LinearOperator:
        """The operator with products in ``dtype`` (not its own); see :meth:`to`."""
        raise MissingStructureError(
            f"{type(self).__name__} cannot compute its products in another dtype; build it "
            f"from {dtype} inputs instead"
        )

    # ----------------------------------------------------------------- algebra
    def __add__(self, other: object) -> LinearOperator:
        if isinstance(other, LinearOperator):
            from .sum import Sum

            return Sum(self, other)
        return NotImplemented

    def __radd__(self, other: object) -> LinearOperator:
        return self.__add__(other)

    def __sub__(self, other: object) -> LinearOperator:
        if isinstance(other, LinearOperator):
            from .scaled import Scaled
            from .scaled_identity import ScaledIdentity
            from .sum import Sum

            if isinstance(other, ScaledIdentity) and other.adopts:
                return Sum(self, other.negated())
            return Sum(self, Scaled(other, -1.0))
        return NotImplemented

    def __mul__(self, scalar: object) -> LinearOperator:
        if isinstance(scalar, int | float) or (
            isinstance(scalar, torch.Tensor) and scalar.ndim == 0
        ):
            from .scaled import Scaled

            return Scaled(self, scalar)
        return NotImplemented

    def __rmul__(self, scalar: object) -> LinearOperator:
        return self.__mul__(scalar)

    def __neg__(self) -> LinearOperator:
        from .scaled import Scaled

        return Scaled(self, -1.0)

    # ----------------------------------------------------------------- helpers
    def _check_operand(self, x: object, n: int, name: str) -> torch.Tensor:
        x = check_tensor(x, name)
        if x.ndim not in (1, 2) or x.shape[0] != n:
            raise ValueError(
                f"{name} must have shape ({n},) or ({n}, k) to multiply an operator of "
                f"shape {self.shape}, got {tuple(x.shape)}"
            )
        check_same_dtype(x, self.dtype, name, "the operator")
        check_same_device(x, self.device, name, "the operator")
        return x

    def _row_index(self, rows: RowIndex, size: int | None = None) -> torch.Tensor:
        size = self.shape[0] if size is None else size
        if isinstance(rows, slice):
            idx = torch.arange(size, device=self.device)[rows]
        else:
            idx = torch.as_tensor(rows, device=self.device)
            if idx.ndim != 1 or idx.dtype in (torch.bool,) or idx.is_floating_point():
                raise ValueError("rows must be a slice, a sequence of ints or a 1-D int tensor")
            idx = idx.long()
            if idx.numel() and (int(idx.min()) < -size or int(idx.max()) >= size):
                raise IndexError(f"rows out of range for an operator with {size} rows")
            idx = torch.where(idx < 0, idx + size, idx)
        return idx
