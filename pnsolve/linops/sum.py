"""Sums of operators."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeGuard

import torch

from ._compat import check_compatible
from .base import LinearOperator

__all__ = ["Sum"]


class Sum(LinearOperator):
    """``A_1 + A_2 + …`` for operators of one shape, dtype and device.

    Parameters
    ----------
    *ops
        At least one operator; nested sums are flattened.
    """

    def __init__(self, *ops: LinearOperator) -> None:
        if not ops:
            raise ValueError("Sum needs at least one operator")
        if not isinstance(ops[0], LinearOperator):
            raise TypeError(f"Sum: operand 0 is not a LinearOperator ({type(ops[0]).__name__})")
        ops = _adopt(ops)
        check_compatible(ops, "Sum")
        flat: list[LinearOperator] = []
        for op in ops:
            flat.extend(op.ops if isinstance(op, Sum) else (op,))
        super().__init__(
            ops[0].shape,
            ops[0].dtype,
            ops[0].device,
            is_symmetric=all(o.is_symmetric for o in flat),
            is_psd=all(o.is_psd for o in flat),
        )
        self.ops: tuple[LinearOperator, ...] = tuple(flat)

    def _to(self, dtype: torch.dtype) -> Sum:
        return Sum(*(op.to(dtype) for op in self.ops))

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._sum(lambda op: op._matmat(X))

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._sum(lambda op: op._rmatmat(X))

    def _diagonal(self) -> torch.Tensor:
        return self._sum(lambda op: op._diagonal())

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        return self._sum(lambda op: op._row_block(rows))

    def _sum(self, term: Callable[[LinearOperator], torch.Tensor]) -> torch.Tensor:
        """``term(A_1) + term(A_2) + …``, summed left to right."""
        out = term(self.ops[0])
        for op in self.ops[1:]:
            out = out + term(op)
        return out


def _adopt(ops: tuple[LinearOperator, ...]) -> tuple[LinearOperator, ...]:
    """Scaled identities without their own dtype take the first other operand's."""
    from .scaled_identity import ScaledIdentity

    def adopting(op: LinearOperator) -> TypeGuard[ScaledIdentity]:
        return isinstance(op, ScaledIdentity) and op.adopts

    like = next((op for op in ops if isinstance(op, LinearOperator) and not adopting(op)), None)
    if like is None:
        return ops
    return tuple(op.adopted(like) if adopting(op) else op for op in ops)
