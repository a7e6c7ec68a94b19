"""Checks for observed targets: real values, binary labels, class indices, counts.

Shared by the likelihoods (:meth:`~pnsolve.likelihoods.Likelihood.check_targets`) and
the classification metrics; every error names the argument.
"""

from __future__ import annotations

import torch

from .._validation import check_tensor

__all__ = ["check_binary_labels", "check_class_labels", "check_counts", "check_real_targets"]


def _vector(y: object, name: str) -> torch.Tensor:
    y = check_tensor(y, name)
    if y.ndim != 1:
        raise ValueError(f"{name} must have shape (n,), got {tuple(y.shape)}")
    if y.is_complex():
        raise TypeError(f"{name} must be real, got dtype {y.dtype}")
    if y.is_floating_point():
        if bool(torch.isnan(y).any()):
            raise ValueError(f"{name} contains NaN values")
        if bool(torch.isinf(y).any()):
            raise ValueError(f"{name} contains Inf values")
    return y


def _as_float(y: torch.Tensor) -> torch.Tensor:
    """Floating ``y`` unchanged; integer or bool ``y`` in the default floating dtype."""
    return y if y.is_floating_point() else y.to(torch.get_default_dtype())


def _require_integers(y: torch.Tensor, name: str, what: str) -> None:
    if y.is_floating_point() and not bool((y == torch.round(y)).all()):
        raise ValueError(f"{name} must hold {what}, got non-integer values")


def check_real_targets(y: object, name: str = "y") -> torch.Tensor:
    """Finite real targets of shape ``(n,)``; integer tensors become floating."""
    return _as_float(_vector(y, name))


def check_binary_labels(y: object, name: str = "y") -> torch.Tensor:
    """Binary labels in ``{0, 1}`` (bool, integer or floating), returned floating, ``(n,)``."""
    y = _vector(y, name)
    if y.dtype != torch.bool and not bool(((y == 0) | (y == 1)).all()):
        hint = " (map ±1 labels with (y + 1) / 2)" if bool((y == -1).any()) else ""
        raise ValueError(f"{name} must hold binary labels in {{0, 1}}{hint}")
    return _as_float(y)


def check_class_labels(y: object, num_classes: int, name: str = "y") -> torch.Tensor:
    """Class indices in ``{0, …, num_classes − 1}``, returned as int64, ``(n,)``.

    Integer tensors and floating tensors with integral values are accepted; bool is not.
    """
    y = _vector(y, name)
    if y.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer class indices, got dtype torch.bool")
    _require_integers(y, name, "integer class indices")
    if y.numel() and (bool((y < 0).any()) or bool((y >= num_classes).any())):
        lo, hi = y.min().item(), y.max().item()
        raise ValueError(
            f"{name} must hold class indices in {{0, …, {num_classes - 1}}}, got values "
            f"from {lo:g} to {hi:g}"
        )
    return y.long()


def check_counts(y: object, name: str = "y") -> torch.Tensor:
    """Non-negative integer counts (integer or integral floating), returned floating, ``(n,)``."""
    y = _vector(y, name)
    if y.dtype == torch.bool:
        raise TypeError(f"{name} must hold counts, got dtype torch.bool")
    _require_integers(y, name, "non-negative integer counts")
    if bool((y < 0).any()):
        raise ValueError(f"{name} must hold non-negative integer counts, got negative values")
    return _as_float(y)
