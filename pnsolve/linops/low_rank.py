"""Low-rank operators in root form ``U Uᵀ`` (or ``U Vᵀ``)."""

from __future__ import annotations

import torch

from .._core.validation import check_same_device, check_same_dtype, check_tensor
from .base import LinearOperator

__all__ = ["LowRank"]


class LowRank(LinearOperator):
    """``U Vᵀ``, by default the symmetric PSD root form ``U Uᵀ``.

    Parameters
    ----------
    U
        Left factor, shape ``(m, r)``.
    V
        Right factor, shape ``(n, r)``; ``None`` means ``V = U`` (symmetric PSD).

    Notes
    -----
    Products cost ``O((m + n) r k)``; the diagonal costs ``O(m r)``.
    """

    def __init__(self, U: torch.Tensor, V: torch.Tensor | None = None) -> None:
        U = check_tensor(U, "U")
        if U.ndim != 2:
            raise ValueError(f"U must have shape (m, r), got {tuple(U.shape)}")
        if not U.is_floating_point():
            raise TypeError(f"U must have a floating dtype, got {U.dtype}")
        symmetric = V is None
        if V is not None:
            V = check_tensor(V, "V")
            if V.ndim != 2 or V.shape[1] != U.shape[1]:
                raise ValueError(
                    f"V must have shape (n, {U.shape[1]}) to match U, got {tuple(V.shape)}"
                )
            check_same_dtype(V, U.dtype, "V", "U")
            check_same_device(V, U.device, "V", "U")
        n = U.shape[0] if V is None else V.shape[0]
        super().__init__(
            (U.shape[0], n), U.dtype, U.device, is_symmetric=symmetric, is_psd=symmetric
        )
        self.U = U
        self.V = U if V is None else V

    @property
    def rank(self) -> int:
        """Number of columns ``r`` of the factors (an upper bound on the rank)."""
        return self.U.shape[1]

    def _to(self, dtype: torch.dtype) -> LowRank:
        return LowRank(self.U.to(dtype), None if self.is_symmetric else self.V.to(dtype))

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.U @ (self.V.mT @ X)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.V @ (self.U.mT @ X)

    def _diagonal(self) -> torch.Tensor:
        k = min(self.shape)
        return (self.U[:k] * self.V[:k]).sum(-1)

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        return self.U[rows] @ self.V.mT
