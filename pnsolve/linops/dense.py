"""Dense (stored) matrices as operators."""

from __future__ import annotations

import torch

from .._core.validation import check_tensor
from .base import LinearOperator
from .symmetry import check_finite_symmetric

__all__ = ["Dense"]


class Dense(LinearOperator):
    """A stored matrix ``A`` of shape ``(m, n)``.

    Parameters
    ----------
    matrix
        Floating tensor of shape ``(m, n)``; it is referenced, not copied.
    is_symmetric, is_psd
        Structural flags. ``is_symmetric=None`` checks symmetry numerically
        (to a dtype-relative tolerance) for square matrices.
    """

    def __init__(
        self,
        matrix: torch.Tensor,
        *,
        is_symmetric: bool | None = None,
        is_psd: bool = False,
    ) -> None:
        matrix = check_tensor(matrix, "matrix")
        if matrix.ndim != 2:
            raise ValueError(f"matrix must have shape (m, n), got {tuple(matrix.shape)}")
        if not matrix.is_floating_point():
            raise TypeError(f"matrix must have a floating dtype, got {matrix.dtype}")
        if is_symmetric is None:  # one pass: NaN/Inf (else it would read as non-symmetric)
            is_symmetric = check_finite_symmetric(matrix, "the matrix")
        super().__init__(
            tuple(matrix.shape),
            matrix.dtype,
            matrix.device,
            is_symmetric=is_symmetric,
            is_psd=is_psd,
        )
        self.matrix = matrix

    def _to(self, dtype: torch.dtype) -> Dense:
        return Dense(self.matrix.to(dtype), is_symmetric=self.is_symmetric, is_psd=self.is_psd)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.matrix @ X

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.matrix.mT @ X

    def _diagonal(self) -> torch.Tensor:
        return torch.diagonal(self.matrix)

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        return self.matrix[rows]

    def to_dense(self) -> torch.Tensor:
        """The stored matrix itself (no copy)."""
        return self.matrix
