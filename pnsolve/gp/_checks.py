"""Argument checks shared by the GP models; errors name the argument.

The GP models take torch tensors or NumPy arrays, as :func:`pnsolve.cg` does: a NumPy
array becomes a tensor (floating arrays keep their dtype, integer and boolean arrays
take the reference dtype) on the reference tensor's device. Complex inputs are refused.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._core.validation import check_finite, check_real_dtype
from ..kernels.base import StationaryKernel
from ..kernels.kernel import Kernel

__all__ = [
    "as_tensor",
    "check_inputs",
    "check_model_kernel",
    "check_noise",
    "check_stationary_kernel",
    "check_targets",
]


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
    if d is not None and X.shape[1] != d:
        raise ValueError(f"{name} must have {d} columns like the training inputs, got {X.shape[1]}")
    if like is not None and (X.dtype != like.dtype or X.device != like.device):
        raise TypeError(
            f"{name} has dtype {X.dtype} on {X.device}; the training inputs have "
            f"{like.dtype} on {like.device}"
        )
    return check_finite(X, name)


def check_targets(y: object, X: torch.Tensor, name: str = "y") -> torch.Tensor:
    """Finite targets of shape ``(n,)`` matching ``X``.

    A NumPy ``y`` is converted on ``X``'s device; integer arrays take ``X``'s dtype.
    """
    y = as_tensor(y, name, int_dtype=X.dtype, device=X.device)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"{name} must have shape ({X.shape[0]},) like X, got {tuple(y.shape)}")
    if y.dtype != X.dtype or y.device != X.device:
        raise TypeError(f"{name} has dtype {y.dtype} on {y.device}; X has {X.dtype} on {X.device}")
    return check_finite(y, name)


def check_model_kernel(kernel: object) -> Kernel:
    """Require a :class:`~pnsolve.kernels.Kernel` (the GP models' prior)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a pnsolve kernel, got {type(kernel).__name__}")
    return kernel


def check_stationary_kernel(kernel: object, user: str) -> StationaryKernel:
    """Require a :class:`~pnsolve.kernels.StationaryKernel` for ``user`` (a model's name).

    For the models built on stationary kernels only (random features, explicit kernel
    formulas); SKI kernels are refused with a pointer to the models that take them.
    """
    if not isinstance(kernel, StationaryKernel):
        raise TypeError(
            f"{user} needs a stationary kernel (pn.kernels.RBF or Matern), got "
            f"{type(kernel).__name__}; SKI kernels (GridInterpolation) work with ExactGP "
            "and IterGP"
        )
    return kernel


def check_noise(noise: object) -> float | torch.Tensor:
    """A positive finite noise variance (number or 0-d tensor)."""
    if isinstance(noise, torch.Tensor) and noise.ndim != 0:
        raise ValueError(f"noise must be a scalar, got shape {tuple(noise.shape)}")
    if isinstance(noise, torch.Tensor):
        value = float(noise.detach())
    else:
        value = float(noise) if isinstance(noise, int | float) else math.nan
    if isinstance(noise, bool) or not (value > 0 and math.isfinite(value)):
        raise ValueError(f"noise must be a positive finite variance, got {noise!r}")
    assert isinstance(noise, torch.Tensor | int | float)  # anything else has value NaN
    return noise
