"""An operator wrapper that counts products (for the one-product-per-iteration claims)."""

from __future__ import annotations

import torch

from ..linops.base import LinearOperator

__all__ = ["CountingOperator"]


class CountingOperator(LinearOperator):
    """Wraps an operator and counts what is asked of it.

    Parameters
    ----------
    op
        The operator to wrap.

    Attributes
    ----------
    matmat_calls
        Number of calls to the product (one call may hold several columns).
    matvecs
        Total number of columns multiplied (``k`` per ``(n, k)`` product).
    rmatmat_calls, rmatvecs
        The same for transposed products.
    row_block_calls, rows_accessed
        Row-block accesses and the total number of rows read.
    diagonal_calls
        Calls to :meth:`diagonal`.
    product_dtypes
        The dtype of every product, in order; shared with the operator :meth:`to`
        returns (a mixed-precision solve's float32 products are logged here too).
    """

    def __init__(self, op: LinearOperator) -> None:
        if not isinstance(op, LinearOperator):
            raise TypeError(f"op must be a LinearOperator, got {type(op).__name__}")
        super().__init__(
            op.shape, op.dtype, op.device, is_symmetric=op.is_symmetric, is_psd=op.is_psd
        )
        self.op = op
        self.reset()

    def reset(self) -> None:
        """Set all counters to zero."""
        self.matmat_calls = 0
        self.matvecs = 0
        self.rmatmat_calls = 0
        self.rmatvecs = 0
        self.row_block_calls = 0
        self.rows_accessed = 0
        self.diagonal_calls = 0
        self.product_dtypes: list[torch.dtype] = []

    @property
    def products(self) -> int:
        """Number of product calls (plain and transposed)."""
        return self.matmat_calls + self.rmatmat_calls

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        self.matmat_calls += 1
        self.matvecs += X.shape[1]
        self.product_dtypes.append(X.dtype)
        return self.op._matmat(X)

    def _to(self, dtype: torch.dtype) -> CountingOperator:
        low = CountingOperator(self.op.to(dtype))
        low.product_dtypes = self.product_dtypes  # one log for both precisions
        return low

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        self.rmatmat_calls += 1
        self.rmatvecs += X.shape[1]
        return self.op._rmatmat(X)

    def _diagonal(self) -> torch.Tensor:
        self.diagonal_calls += 1
        return self.op._diagonal()

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        self.row_block_calls += 1
        self.rows_accessed += rows.numel()
        return self.op._row_block(rows)
