"""Data inputs of models and studies: arrays or tensors of shape ``(n, d)``, checked once.

Shared by the GP models (:mod:`pnsolve.gp`) and the calibration studies
(:mod:`pnsolve.metrics`): NumPy arrays are converted, complex and half precision are
refused, shapes, dtypes, devices and finiteness are named in the errors.
"""

from __future__ import annotations

import numpy as np
import torch

from .validation import check_finite, check_real_dtype

__all__ = ["as_tensor", "check_inputs"]


def _dtype_name(dtype: object) -> str:
    return str(dtype).removeprefix("torch.")


def as_tensor(
    x: object,
    name: str,
    *,
    int_dtype: torch.dtype | None = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``x`` as a real tensor: tensors pass unchanged, NumPy arrays are converted.

    Parameters
    ----------
    x
        A ``torch.Tensor`` or ``numpy.ndarray``.
    name
        The argument's name for error messages.
    int_dtype
        Dtype for integer and boolean arrays; ``None`` keeps them integer (class
        labels, counts: the likelihood checks them).
    device
        Device of a converted array (default: torch's default device; tensors are never
        moved).

    Raises
    ------
    TypeError
        ``x`` is neither a tensor nor a NumPy array, or it is complex (``"X must be
        real, got complex128"``), or a NumPy array of a non-numeric or half dtype.
    """
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "c":
            raise TypeError(f"{name} must be real, got {x.dtype}")
        if x.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a numeric array, got dtype {x.dtype}")
        if not x.flags.writeable or any(s < 0 for s in x.strides):
            x = np.array(x)  # a writable, positively strided copy torch can share
        t = torch.as_tensor(x, device=device)
        check_real_dtype(t.dtype, name)  # float16 arrays: pnsolve computes in f32/f64
        if not t.is_floating_point() and int_dtype is not None:
            t = t.to(int_dtype)
        return t
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array, got {type(x).__name__}")
    if x.is_complex():
        raise TypeError(f"{name} must be real, got {_dtype_name(x.dtype)}")
    return x


def _check_like(x: torch.Tensor, name: str, like: torch.Tensor, other: str) -> None:
    """``x``'s dtype (``TypeError``) and device (``ValueError``) those of ``like``."""
    if x.dtype != like.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but {other} {like.dtype}; cast it (e.g. "
            f"{name}.to({like.dtype}))"
        )
    if x.device != like.device:
        raise ValueError(f"{name} is on device {x.device} but {other} on {like.device}")


def check_inputs(
    X: object, name: str, d: int | None = None, like: torch.Tensor | None = None
) -> torch.Tensor:
    """A finite floating ``(n, d)`` tensor (matching ``like``'s dtype/device when given).

    NumPy arrays are converted (see :func:`as_tensor`): floating arrays keep their
    dtype, integer arrays take ``like``'s dtype (float64 without ``like``).
    """
    X = as_tensor(
        X,
        name,
        int_dtype=torch.float64 if like is None else like.dtype,
        device=None if like is None else like.device,
    )
    if X.ndim != 2 or X.shape[0] < 1:
        raise ValueError(f"{name} must have shape (n, d) with n ≥ 1, got {tuple(X.shape)}")
    if not X.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {X.dtype}")
    check_real_dtype(X.dtype, name)  # float16/bfloat16: pnsolve computes in f32/f64
    if d is not None and X.shape[1] != d:
        raise ValueError(
            f"{name} must have {d} columns like the training inputs, got {X.shape[1]} "
            f"(shape {tuple(X.shape)})"
        )
    if like is not None:
        _check_like(X, name, like, "the training inputs have")
    return check_finite(X, name)
