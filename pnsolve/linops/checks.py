"""Argument checks shared by the Krylov front doors; every error names its argument."""

from __future__ import annotations

import math

import numpy as np
import torch

from .._core.validation import (
    check_finite,
    check_real_dtype,
    check_same_device,
    check_same_dtype,
    check_tensor,
)
from .base import LinearOperator
from .conversion import as_linop

__all__ = [
    "as_operand",
    "as_preconditioner",
    "as_square_operator",
    "as_system",
    "check_nonnegative",
    "check_optional_count",
]


def as_square_operator(obj: object, name: str, *, symmetric: bool = True) -> LinearOperator:
    """Wrap ``obj`` with :func:`as_linop` and require a square, symmetric operator.

    Symmetry is enforced only where it is *known*: stored matrices (tensors, NumPy
    arrays, SciPy sparse matrices) are checked numerically by :func:`as_linop`, so a
    non-symmetric one raises. Matrix-free operators (``Closure``, SciPy
    ``LinearOperator``) carry no symmetry information (their flag defaults to
    ``False``) and are accepted: symmetry is then the caller's promise.
    ``symmetric=False`` skips the check (for preconditioners, which are only applied).
    """
    numeric = isinstance(obj, torch.Tensor | np.ndarray) or _is_scipy_sparse(obj)
    op = as_linop(obj, name=name)
    check_real_dtype(op.dtype, name)
    if not op.is_square:
        raise ValueError(f"{name} must be square, got shape {op.shape}")
    if op.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {op.shape}): there is no system to solve")
    if symmetric and numeric and not op.is_symmetric:
        raise ValueError(f"{name} must be symmetric (positive definite); the given matrix is not")
    return op


def as_operand(
    x: object, op: LinearOperator, name: str, *, allow_matrix: bool = True
) -> torch.Tensor:
    """Return ``x`` as a finite tensor of shape ``(n,)`` (or ``(n, k)``) matching ``op``.

    NumPy arrays are converted with ``torch.as_tensor`` (integer arrays to the
    operator's dtype, placed on the operator's device); tensors must already share
    the operator's dtype and device.
    """
    if isinstance(x, np.ndarray):
        if np.issubdtype(x.dtype, np.complexfloating) or x.dtype == np.float16:
            check_real_dtype(torch.from_numpy(np.zeros(0, dtype=x.dtype)).dtype, name)
        t = torch.as_tensor(x, device=op.device)
        x = t if t.is_floating_point() else t.to(op.dtype)
    x = check_tensor(x, name)
    check_real_dtype(x.dtype, name)
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
    n = op.shape[1]
    shapes = f"({n},) or ({n}, k)" if allow_matrix else f"({n},)"
    if x.ndim not in ((1, 2) if allow_matrix else (1,)) or x.shape[0] != n:
        raise ValueError(
            f"{name} must have shape {shapes} for an operator of shape {op.shape}, "
            f"got {tuple(x.shape)}"
        )
    check_same_dtype(x, op.dtype, name, "the operator")
    check_same_device(x, op.device, name, "the operator")
    check_finite(x, name)
    return x


def as_system(
    A: object, b: object, x0: object, *, allow_matrix: bool = True
) -> tuple[LinearOperator, torch.Tensor, torch.Tensor | None]:
    """``(A, b, x0)`` of ``A x = b`` checked by :func:`as_square_operator` and :func:`as_operand`.

    ``x0`` is ``None`` or must have ``b``'s shape.
    """
    A = as_square_operator(A, "A")
    b = as_operand(b, A, "b", allow_matrix=allow_matrix)
    x0 = None if x0 is None else as_operand(x0, A, "x0", allow_matrix=allow_matrix)
    if x0 is not None and x0.shape != b.shape:
        raise ValueError(f"x0 must have the shape of b {tuple(b.shape)}, got {tuple(x0.shape)}")
    return A, b, x0


def as_preconditioner(M: object, A: LinearOperator) -> LinearOperator | None:
    """``None`` or ``M`` as an operator matching ``A`` in shape, dtype and device."""
    if M is None:
        return None
    M = as_square_operator(M, "M", symmetric=False)
    if M.shape != A.shape or M.dtype != A.dtype or M.device != A.device:
        raise ValueError(
            f"M must match A (shape {A.shape}, {A.dtype}, {A.device}); got shape "
            f"{M.shape}, {M.dtype}, {M.device}"
        )
    return M


def check_nonnegative(value: object, name: str) -> float:
    """Require a finite real number ``≥ 0``; return it as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        if not (isinstance(value, torch.Tensor) and value.ndim == 0):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and non-negative, got {value}")
    return v


def check_optional_count(value: object, name: str, default: int) -> int:
    """Require ``None`` (meaning ``default``) or an int ``≥ 0``."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be non-negative, got {value}")
    return int(value)


def _is_scipy_sparse(obj: object) -> bool:
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a hard dependency
        return False
    return bool(sp.issparse(obj))
