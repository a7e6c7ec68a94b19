"""Regression metrics: RMSE and the scaled mean absolute error of variances (SMAE)."""

from __future__ import annotations

import torch

from .._core.validation import check_finite, check_tensor

__all__ = ["rmse", "smae"]


def _check_same_vectors(a: torch.Tensor, b: torch.Tensor, names: tuple[str, str]) -> None:
    """Require ``a`` and ``b`` to be non-empty vectors of the same shape."""
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(
            f"{names[0]} and {names[1]} must be vectors of the same shape, got "
            f"{tuple(a.shape)} and {tuple(b.shape)}"
        )
    if a.numel() == 0:
        raise ValueError(f"{names[0]} is empty")


def _pair(a: object, b: object, names: tuple[str, str]) -> tuple[torch.Tensor, torch.Tensor]:
    a = check_finite(check_tensor(a, names[0]), names[0])
    b = check_finite(check_tensor(b, names[1]), names[1])
    _check_same_vectors(a, b, names)
    return a, b


def rmse(prediction: torch.Tensor, y: torch.Tensor) -> float:
    """Root mean squared error ``√(mean (prediction − y)²)``.

    Parameters
    ----------
    prediction, y
        Shape ``(t,)`` each.
    """
    prediction, y = _pair(prediction, y, ("prediction", "y"))
    return float((prediction - y).square().mean().sqrt())


def smae(estimate: torch.Tensor, reference: torch.Tensor, y: torch.Tensor) -> float:
    """Scaled mean absolute error ``mean |estimate − reference| / Var(y)``.

    The LOVE paper's accuracy measure for approximate predictive variances (Pleiss et
    al., 2018, after Rasmussen & Williams, 2006): the mean absolute error divided by the
    variance of the test targets, so that it reads on the scale of the data.

    Parameters
    ----------
    estimate
        Approximate variances, shape ``(t,)``.
    reference
        Exact variances, shape ``(t,)``.
    y
        Test targets whose (population) variance scales the error, shape ``(m,)``,
        ``m ≥ 2``, not constant.
    """
    estimate, reference = _pair(estimate, reference, ("estimate", "reference"))
    y = check_finite(check_tensor(y, "y"), "y")
    if y.ndim != 1 or y.numel() < 2:
        raise ValueError(f"y must be a vector of at least 2 targets, got shape {tuple(y.shape)}")
    var = y.var(correction=0)
    if not bool(var > 0):
        raise ValueError("y is constant: its variance cannot scale the error")
    return float((estimate - reference).abs().mean() / var)
