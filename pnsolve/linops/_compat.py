"""Checks that several operators can be combined."""

from __future__ import annotations

from collections.abc import Sequence

from .base import LinearOperator

__all__ = ["check_compatible"]


def check_compatible(ops: Sequence[LinearOperator], what: str, same_shape: bool = True) -> None:
    """Raise if ``ops`` differ in dtype or device (or shape when ``same_shape``)."""
    first = ops[0]
    for i, op in enumerate(ops[1:], start=1):
        if not isinstance(op, LinearOperator):
            raise TypeError(f"{what}: operand {i} is not a LinearOperator ({type(op).__name__})")
        if same_shape and op.shape != first.shape:
            raise ValueError(f"{what}: operand {i} has shape {op.shape}, expected {first.shape}")
        if op.dtype != first.dtype:
            raise TypeError(f"{what}: operand {i} has dtype {op.dtype}, expected {first.dtype}")
        if op.device != first.device:
            raise ValueError(
                f"{what}: operand {i} is on device {op.device}, expected {first.device}"
            )
