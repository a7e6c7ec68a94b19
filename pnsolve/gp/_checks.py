"""Argument checks shared by the GP models; errors name the argument."""

from __future__ import annotations

import math

import torch

from .._validation import check_finite, check_tensor

__all__ = ["check_inputs", "check_noise", "check_targets"]


def check_inputs(X: object, name: str, d: int | None = None, like: torch.Tensor | None = None):
    """A finite floating ``(n, d)`` tensor (matching ``like``'s dtype/device when given)."""
    X = check_tensor(X, name)
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
    """Finite targets of shape ``(n,)`` matching ``X``."""
    y = check_tensor(y, name)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"{name} must have shape ({X.shape[0]},) like X, got {tuple(y.shape)}")
    if y.dtype != X.dtype or y.device != X.device:
        raise TypeError(f"{name} has dtype {y.dtype} on {y.device}; X has {X.dtype} on {X.device}")
    return check_finite(y, name)


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
    return noise
