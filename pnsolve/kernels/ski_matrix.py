"""SKI kernel matrices ``W₁ K_UU W₂ᵀ`` as structured operators."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch

from ..linops.base import LinearOperator
from ..linops.interpolation import SparseInterpolation
from .grid import Grid

if TYPE_CHECKING:  # pragma: no cover
    from .grid_interpolation import GridInterpolation

__all__ = ["DENSE_BLOCK_BYTES", "GridInterpolationMatrix"]

#: Memory for the grid vectors of one column block of :meth:`GridInterpolationMatrix.to_dense`.
DENSE_BLOCK_BYTES = 2**28


class GridInterpolationMatrix(LinearOperator):
    """``k_SKI(X1, X2) = W₁ K_UU W₂ᵀ`` (Wilson & Nickisch, 2015), never formed.

    Build it with :meth:`GridInterpolation.linop <pnsolve.kernels.GridInterpolation.linop>`.
    A product costs ``O((n1 + n2) 4ᵈ + m log m)`` per column: two sparse interpolation
    products and one FFT product with the grid matrix ``K_UU`` (Kronecker of Toeplitz
    factors for separable kernels, a ``d``-level Toeplitz otherwise).

    Attributes
    ----------
    kernel
        The :class:`~pnsolve.kernels.GridInterpolation` kernel.
    grid
        The :class:`~pnsolve.kernels.grid.Grid` in use.
    left, right
        Interpolation weights ``W₁`` ``(n1, m)`` and ``W₂`` ``(n2, m)`` (``right is
        left`` when ``X2`` is ``None``).
    grid_matrix
        ``K_UU`` ``(m, m)``, built from the base kernel's current hyperparameters (autograd
        reaches them through its products).
    """

    def __init__(
        self,
        kernel: GridInterpolation,
        grid: Grid,
        left: SparseInterpolation,
        right: SparseInterpolation | None = None,
    ) -> None:
        sym = right is None
        right = left if right is None else right
        super().__init__(
            (left.shape[0], right.shape[0]), left.dtype, left.device, is_symmetric=sym, is_psd=sym
        )
        self.kernel = kernel
        self.grid = grid
        self.left = left
        self.right = right
        self.grid_matrix = kernel.grid_matrix(grid, left.dtype, left.device)

    def __repr__(self) -> str:
        return (
            f"GridInterpolationMatrix(shape={self.shape}, grid={self.grid.sizes}, "
            f"dtype={self.dtype})"
        )

    def _to(self, dtype: torch.dtype) -> GridInterpolationMatrix:
        left = cast(SparseInterpolation, self.left.to(dtype))
        right = None if self.is_symmetric else cast(SparseInterpolation, self.right.to(dtype))
        return GridInterpolationMatrix(self.kernel, self.grid, left, right)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.left @ (self.grid_matrix @ self.right.rmatmat(X))

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.right @ (self.grid_matrix @ self.left.rmatmat(X))

    def _diagonal(self) -> torch.Tensor:
        if self.is_symmetric:
            return self.kernel.stencil_quadratic_form(self.grid, self.left.values)
        m = min(self.shape)
        return self.kernel.grid_bilinear_rows(
            self.grid, self.left.indices[:m], self.left.values[:m], self.right.indices[:m],
            self.right.values[:m],
        )  # fmt: skip

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        W_rows = self.left.row_block(rows)  # (r, m), r requested rows only
        return (self.right @ (self.grid_matrix @ W_rows.mT)).mT

    def to_dense(self) -> torch.Tensor:
        """The dense ``(n1, n2)`` matrix; the smaller side goes through the grid.

        ``W₁ (K_UU W₂ᵀ)`` or ``(W₂ (K_UU W₁ᵀ))ᵀ``, the smaller side's unit vectors in
        column blocks of at most :data:`DENSE_BLOCK_BYTES` of grid vectors (FFT buffers
        included): memory ``O(n1 n2)`` plus that block, never an identity of the larger
        side.
        """
        n1, n2 = self.shape
        small, other, transpose = (self.left, self.right, True) if n1 <= n2 else (
            self.right, self.left, False)  # fmt: skip
        k = small.shape[0]
        per_column = self.grid.size * (2**self.grid.dim) * 16  # complex FFT buffer
        block = max(1, min(k, DENSE_BLOCK_BYTES // per_column))
        out = torch.empty(other.shape[0], k, dtype=self.dtype, device=self.device)
        for c0 in range(0, k, block):
            c1 = min(k, c0 + block)
            E = torch.zeros(k, c1 - c0, dtype=self.dtype, device=self.device)
            E.diagonal(offset=-c0).fill_(1)  # E[c0 + j, j] = 1
            out[:, c0:c1] = other @ (self.grid_matrix @ small.rmatmat(E))
        return out.mT if transpose else out

    def add_diagonal(self, noise: float | torch.Tensor) -> LinearOperator:
        """``K + noise · I`` as a :class:`~pnsolve.linops.Sum` (square operators only)."""
        if not self.is_square:
            raise ValueError(f"add_diagonal needs a square operator, got shape {self.shape}")
        from ..linops.scaled_identity import ScaledIdentity

        return self + ScaledIdentity(self.shape[0], noise, dtype=self.dtype, device=self.device)
