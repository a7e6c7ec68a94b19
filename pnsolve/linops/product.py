"""Products (compositions) of operators."""

from __future__ import annotations

import torch

from .base import LinearOperator

__all__ = ["Product"]


class Product(LinearOperator):
    """``A B`` applied lazily as ``A (B X)``.

    Parameters
    ----------
    left, right
        Operators with ``left.shape[1] == right.shape[0]``, same dtype and device.
    """

    def __init__(self, left: LinearOperator, right: LinearOperator) -> None:
        for name, op in (("left", left), ("right", right)):
            if not isinstance(op, LinearOperator):
                raise TypeError(f"{name} must be a LinearOperator, got {type(op).__name__}")
        if left.shape[1] != right.shape[0]:
            raise ValueError(f"cannot compose shapes {left.shape} and {right.shape}")
        if left.dtype != right.dtype:
            raise TypeError(f"dtypes differ: {left.dtype} and {right.dtype}")
        if left.device != right.device:
            raise ValueError(f"devices differ: {left.device} and {right.device}")
        super().__init__((left.shape[0], right.shape[1]), left.dtype, left.device)
        self.left = left
        self.right = right

    def _to(self, dtype: torch.dtype) -> Product:
        return Product(self.left.to(dtype), self.right.to(dtype))

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.left._matmat(self.right._matmat(X))

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.right._rmatmat(self.left._rmatmat(X))
