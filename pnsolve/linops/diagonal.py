"""Diagonal operators."""

from __future__ import annotations

import torch

from .._core.validation import check_tensor
from .base import LinearOperator

__all__ = ["Diagonal"]


class Diagonal(LinearOperator):
    """``diag(d)`` for a vector ``d`` of shape ``(n,)``.

    Parameters
    ----------
    diag
        Floating tensor of shape ``(n,)``. The operator is flagged PSD when all
        entries are non-negative.
    """

    def __init__(self, diag: torch.Tensor) -> None:
        diag = check_tensor(diag, "diag")
        if diag.ndim != 1:
            raise ValueError(f"diag must have shape (n,), got {tuple(diag.shape)}")
        if not diag.is_floating_point():
            raise TypeError(f"diag must have a floating dtype, got {diag.dtype}")
        n = diag.shape[0]
        psd = bool((diag.detach() >= 0).all())
        super().__init__((n, n), diag.dtype, diag.device, is_symmetric=True, is_psd=psd)
        self.diag = diag

    def _to(self, dtype: torch.dtype) -> Diagonal:
        return Diagonal(self.diag.to(dtype))

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.diag.unsqueeze(-1) * X

    def _diagonal(self) -> torch.Tensor:
        return self.diag

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(rows.numel(), self.shape[1], dtype=self.dtype, device=self.device)
        out[torch.arange(rows.numel(), device=self.device), rows] = self.diag[rows]
        return out

    def inverse(self) -> Diagonal:
        """``diag(1/d)``; raises ``ZeroDivisionError`` if an entry is zero."""
        if bool((self.diag == 0).any()):
            raise ZeroDivisionError("Diagonal.inverse: the diagonal has zero entries")
        return Diagonal(1.0 / self.diag)
