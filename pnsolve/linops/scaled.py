"""Scalar multiples of operators."""

from __future__ import annotations

import torch

from .base import LinearOperator

__all__ = ["Scaled"]


class Scaled(LinearOperator):
    """``c · A`` for a scalar ``c`` (Python number or 0-d tensor, autograd-friendly).

    Parameters
    ----------
    op
        The operator ``A``.
    scale
        The scalar ``c``.
    """

    def __init__(self, op: LinearOperator, scale: float | torch.Tensor) -> None:
        if not isinstance(op, LinearOperator):
            raise TypeError(f"op must be a LinearOperator, got {type(op).__name__}")
        if isinstance(scale, torch.Tensor) and scale.ndim != 0:
            raise ValueError(f"scale must be a scalar, got shape {tuple(scale.shape)}")
        nonneg = bool(scale >= 0)
        super().__init__(
            op.shape,
            op.dtype,
            op.device,
            is_symmetric=op.is_symmetric,
            is_psd=op.is_psd and nonneg,
        )
        self.op = op
        self.scale = scale

    def _to(self, dtype: torch.dtype) -> Scaled:
        scale = self.scale.to(dtype) if isinstance(self.scale, torch.Tensor) else self.scale
        return Scaled(self.op.to(dtype), scale)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.scale * self.op._matmat(X)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.scale * self.op._rmatmat(X)

    def _diagonal(self) -> torch.Tensor:
        return self.scale * self.op._diagonal()

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        return self.scale * self.op._row_block(rows)
