"""Sparse interpolation operators: a fixed number of weights per row (SKI's ``W``)."""

from __future__ import annotations

import warnings

import torch

from .._core.validation import check_finite, check_tensor
from .base import LinearOperator

__all__ = ["SparseInterpolation"]


class SparseInterpolation(LinearOperator):
    """``W`` of shape ``(n, m)`` with ``s`` stored weights per row.

    ``W[i, indices[i, a]] = values[i, a]`` (repeated indices in a row add up). Row
    ``i`` interpolates a function on ``m`` grid points at the ``i``-th input, so
    ``W f`` evaluates and ``Wᵀ v`` spreads back onto the grid: ``O(n s)`` work per
    column each way (compressed-sparse-row products for ``W`` and ``Wᵀ``), no dense
    ``n × m`` object.

    Parameters
    ----------
    indices
        Integer tensor of shape ``(n, s)``, entries in ``[0, m)``.
    values
        Floating tensor of shape ``(n, s)``, finite; fixes dtype and device.
    num_columns
        ``m``.

    Raises
    ------
    TypeError
        If ``indices`` is not an integer tensor or ``values`` not a floating one.
    ValueError
        For mismatched shapes, indices out of range, non-finite values or another device.

    Notes
    -----
    Gradients reach the right-hand side of products (not ``values``: interpolation
    weights depend on the inputs only).
    """

    def __init__(self, indices: torch.Tensor, values: torch.Tensor, num_columns: int) -> None:
        indices = check_tensor(indices, "indices")
        values = check_tensor(values, "values")
        if indices.is_floating_point() or indices.is_complex() or indices.dtype == torch.bool:
            raise TypeError(f"indices must be an integer tensor, got {indices.dtype}")
        if not values.is_floating_point() or values.is_complex():
            raise TypeError(f"values must be a real floating tensor, got {values.dtype}")
        if indices.ndim != 2 or values.shape != indices.shape:
            raise ValueError(
                "indices and values must both have shape (n, s), got "
                f"{tuple(indices.shape)} and {tuple(values.shape)}"
            )
        if indices.shape[1] < 1:
            raise ValueError("indices must hold at least one weight per row (s ≥ 1)")
        if indices.device != values.device:
            raise ValueError(f"indices are on {indices.device} but values on {values.device}")
        if isinstance(num_columns, bool) or not isinstance(num_columns, int) or num_columns < 1:
            raise ValueError(f"num_columns must be a positive int, got {num_columns!r}")
        if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= num_columns):
            raise ValueError(f"indices must lie in [0, {num_columns}), got entries outside")
        check_finite(values, "values")
        n, s = indices.shape
        super().__init__((n, num_columns), values.dtype, values.device)
        self.indices = indices.long()
        self.values = values.detach()
        crow = torch.arange(0, n * s + 1, s, device=values.device)
        with warnings.catch_warnings():  # torch flags its CSR support as beta once per process
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            self._csr = torch.sparse_csr_tensor(
                crow,
                self.indices.reshape(-1),
                self.values.reshape(-1),
                (n, num_columns),
                device=values.device,
                check_invariants=False,
            )
        self._csr_t: torch.Tensor | None = None  # Wᵀ in CSR form, built on first use

    @property
    def nnz_per_row(self) -> int:
        """``s``, the stored weights per row."""
        return self.indices.shape[1]

    def __repr__(self) -> str:
        return (
            f"SparseInterpolation(shape={self.shape}, nnz_per_row={self.nnz_per_row}, "
            f"dtype={self.dtype})"
        )

    def _to(self, dtype: torch.dtype) -> SparseInterpolation:
        return SparseInterpolation(self.indices, self.values.to(dtype), self.shape[1])

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        # row-major operands keep torch's CSR product on its sparse kernel (a strided
        # operand is copied here, O(m k), rather than risking a slower path)
        return self._csr @ X.contiguous()

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        if self._csr_t is None:  # a transposed product is then a row-parallel product
            self._csr_t = self._csr.to_sparse_coo().t().coalesce().to_sparse_csr()
        return self._csr_t @ X.contiguous()

    def _diagonal(self) -> torch.Tensor:
        m = min(self.shape)
        rows = torch.arange(m, device=self.device)
        hit = self.indices[:m] == rows.unsqueeze(-1)
        return (self.values[:m] * hit).sum(-1)

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(rows.numel(), self.shape[1], dtype=self.dtype, device=self.device)
        return out.scatter_add_(1, self.indices[rows], self.values[rows])
