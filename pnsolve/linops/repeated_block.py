"""``I_C ⊗ K``: one operator repeated on the diagonal (independent outputs, shared prior)."""

from __future__ import annotations

import torch

from .base import LinearOperator

__all__ = ["RepeatedBlockDiagonal"]


class RepeatedBlockDiagonal(LinearOperator):
    """``blkdiag(K, …, K)`` with ``copies`` blocks: ``I_C ⊗ K`` in block-major order.

    The prior of ``C`` independent latent functions sharing a kernel (multi-class GP
    classification) in the *class-major* layout ``[f_1(X); …; f_C(X)]``. A product
    applies ``K`` once to all ``C·k`` columns (for a matrix-free kernel matrix: one
    pass over the kernel tiles instead of ``C``).

    Parameters
    ----------
    K
        Block of shape ``(n, n)``.
    copies
        Number of blocks ``C ≥ 1``.
    """

    def __init__(self, K: LinearOperator, copies: int) -> None:
        if not isinstance(K, LinearOperator):
            raise TypeError(f"K must be a LinearOperator, got {type(K).__name__}")
        if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
            raise ValueError(f"copies must be a positive int, got {copies!r}")
        m, n = K.shape
        super().__init__(
            (copies * m, copies * n),
            K.dtype,
            K.device,
            is_symmetric=K.is_symmetric,
            is_psd=K.is_psd,
        )
        self.K = K
        self.copies = copies

    def _apply(self, X: torch.Tensor, transpose: bool) -> torch.Tensor:
        C, k = self.copies, X.shape[1]
        m, n = self.K.shape if not transpose else self.K.shape[::-1]
        Y = X.reshape(C, n, k).permute(1, 0, 2).reshape(n, C * k)
        Y = self.K._rmatmat(Y) if transpose else self.K._matmat(Y)
        return Y.reshape(m, C, k).permute(1, 0, 2).reshape(C * m, k)

    def _to(self, dtype: torch.dtype) -> RepeatedBlockDiagonal:
        return RepeatedBlockDiagonal(self.K.to(dtype), self.copies)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._apply(X, transpose=False)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._apply(X, transpose=True)

    def _diagonal(self) -> torch.Tensor:
        if not self.K.is_square:
            return super()._diagonal()
        return self.K._diagonal().repeat(self.copies)

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        m, n = self.K.shape
        block, local = rows // m, rows % m
        R = self.K._row_block(local)  # (r, n)
        out = torch.zeros(rows.numel(), self.copies * n, dtype=self.dtype, device=self.device)
        cols = block.unsqueeze(-1) * n + torch.arange(n, device=self.device)
        return out.scatter_(1, cols, R)

    def __repr__(self) -> str:
        return f"RepeatedBlockDiagonal({self.K!r}, copies={self.copies})"
