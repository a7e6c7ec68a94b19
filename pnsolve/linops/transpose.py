"""Transposed view of an operator."""

from __future__ import annotations

import torch

from .base import LinearOperator

__all__ = ["Transpose"]


class Transpose(LinearOperator):
    """``Aᵀ`` as a view: products use ``A``'s transposed product."""

    def __init__(self, op: LinearOperator) -> None:
        super().__init__((op.shape[1], op.shape[0]), op.dtype, op.device)
        self.op = op

    @property
    def T(self) -> LinearOperator:
        """The original operator (transposing twice is the identity)."""
        return self.op

    def _to(self, dtype: torch.dtype) -> Transpose:
        return Transpose(self.op.to(dtype))

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.op._rmatmat(X)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.op._matmat(X)

    def _diagonal(self) -> torch.Tensor:
        return self.op._diagonal()
