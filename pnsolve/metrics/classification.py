"""Metrics for probabilistic predictions: accuracy, NLL, ECE, and test log-likelihoods.

Classification metrics take predicted probabilities ``probs`` of shape ``(t,)`` (binary:
``p(y = 1)``, labels in ``{0, 1}``) or ``(t, C)`` (rows on the simplex, labels in
``{0, …, C−1}``). The predicted class is the most probable one (binary: ``p > 1/2``;
ties go to the lower class index), its probability is the *confidence*.
"""

from __future__ import annotations

import math

import torch

from .._core.validation import (
    check_binary_labels,
    check_class_labels,
    check_counts,
    check_finite,
    check_real_targets,
    check_tensor,
)
from .regression import _check_same_vectors

__all__ = ["accuracy", "ece", "gaussian_log_likelihood", "nll", "poisson_log_likelihood"]


def _predictions(probs: object, y: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Checked ``probs`` ``(t,)``/``(t, C)`` and labels ``y`` (int64, on ``probs``' device)."""
    probs = check_tensor(probs, "probs")
    if not probs.is_floating_point():
        raise TypeError(f"probs must have a floating dtype, got {probs.dtype}")
    check_finite(probs, "probs")
    if probs.ndim not in (1, 2) or (probs.ndim == 2 and probs.shape[1] < 2):
        raise ValueError(
            f"probs must have shape (t,) (binary p(y=1)) or (t, C) with C ≥ 2, got "
            f"{tuple(probs.shape)}"
        )
    if probs.shape[0] == 0:
        raise ValueError("probs is empty")
    if bool((probs < 0).any()) or bool((probs > 1).any()):
        raise ValueError("probs must lie in [0, 1] (pass probabilities, not logits)")
    if probs.ndim == 2:
        C = probs.shape[1]
        tol = C * math.sqrt(torch.finfo(probs.dtype).eps)
        if bool(((probs.sum(1) - 1).abs() > tol).any()):
            raise ValueError("the rows of probs must sum to 1 (pass probabilities, not logits)")
        labels = check_class_labels(y, C, "y")
    else:
        labels = check_binary_labels(y, "y").long()
    if labels.shape[0] != probs.shape[0]:
        raise ValueError(f"y has {labels.shape[0]} labels but probs has {probs.shape[0]} rows")
    return probs, labels.to(probs.device)


def _top_class(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Confidence and predicted class, shape ``(t,)`` each."""
    if probs.ndim == 1:
        pred = (probs > 0.5).long()
        return torch.where(pred == 1, probs, 1 - probs), pred
    conf, pred = probs.max(dim=1)
    return conf, pred


def _prob_of_label(probs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if probs.ndim == 1:
        return torch.where(y == 1, probs, 1 - probs)
    return probs.gather(1, y.unsqueeze(1)).squeeze(1)


def accuracy(probs: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of points whose most probable class is the label.

    Parameters
    ----------
    probs
        ``p(y = 1)`` of shape ``(t,)``, or class probabilities of shape ``(t, C)``.
    y
        Labels, shape ``(t,)``: in ``{0, 1}`` (bool, integer or floating) for binary
        ``probs``, integer indices in ``{0, …, C−1}`` otherwise.
    """
    probs, y = _predictions(probs, y)
    return float((_top_class(probs)[1] == y).to(probs.dtype).mean())


def nll(probs: torch.Tensor, y: torch.Tensor) -> float:
    """Mean negative log predictive probability ``−mean log p(yᵢ)`` of the labels.

    Probabilities are clamped below at the smallest normal number of the dtype
    (``torch.finfo(dtype).tiny``), so a confidently wrong prediction costs at most
    ``−log tiny`` (708 in float64, 87 in float32) instead of ``inf``.

    Parameters
    ----------
    probs, y
        As in :func:`accuracy`.
    """
    probs, y = _predictions(probs, y)
    p = _prob_of_label(probs, y).clamp(min=torch.finfo(probs.dtype).tiny)
    return float(-p.log().mean())


def ece(probs: torch.Tensor, y: torch.Tensor, bins: int = 15) -> float:
    """Expected calibration error of the top-class confidence, equal-width bins.

    ``ECE = Σ_b (|B_b| / t) · |acc(B_b) − conf(B_b)|`` with bins
    ``B_b = {i : confᵢ ∈ (b/bins, (b+1)/bins]}`` (the first bin also holds ``0``), where
    ``acc`` and ``conf`` are the bin's accuracy and mean confidence (Guo et al., 2017).
    Perfectly calibrated predictions have ``ECE → 0`` as ``t → ∞``; with finitely many
    points the estimate is positively biased by about ``√(bins / t)``.

    Parameters
    ----------
    probs, y
        As in :func:`accuracy`.
    bins
        Number of equal-width bins on ``[0, 1]``.
    """
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive int, got {bins!r}")
    probs, y = _predictions(probs, y)
    conf, pred = _top_class(probs)
    idx = (torch.ceil(conf * bins).long() - 1).clamp(0, bins - 1)
    gap = torch.zeros(bins, dtype=probs.dtype, device=probs.device)
    gap.index_add_(0, idx, (pred == y).to(probs.dtype) - conf)
    return float(gap.abs().sum() / probs.shape[0])


def _regression_pair(a: object, y: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = check_finite(check_tensor(a, name), name)
    if not a.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {a.dtype}")
    _check_same_vectors(a, y, (name, "y"))
    if a.device != y.device:
        raise ValueError(f"y is on device {y.device} but {name} is on device {a.device}")
    return a, y.to(a.dtype)


def gaussian_log_likelihood(mean: torch.Tensor, var: torch.Tensor, y: torch.Tensor) -> float:
    """Mean test log-likelihood ``mean_i log N(yᵢ; meanᵢ, varᵢ)``.

    Parameters
    ----------
    mean
        Predictive means, shape ``(t,)``.
    var
        Predictive variances of ``y`` (include the observation noise), shape ``(t,)``,
        positive.
    y
        Test targets, shape ``(t,)``.
    """
    y = check_real_targets(y, "y")
    mean, y = _regression_pair(mean, y, "mean")
    var, _ = _regression_pair(var, y, "var")
    if var.dtype != mean.dtype:
        raise TypeError(f"var has dtype {var.dtype} but mean has dtype {mean.dtype}")
    if not bool((var > 0).all()):
        raise ValueError("var must be positive")
    ll = -0.5 * (math.log(2 * math.pi) + var.log() + (y - mean).square() / var)
    return float(ll.mean())


def poisson_log_likelihood(rate: torch.Tensor, y: torch.Tensor) -> float:
    """Mean log-likelihood of counts under Poisson rates: ``mean_i log Poisson(yᵢ; rateᵢ)``.

    ``log Poisson(y; λ) = y log λ − λ − log Γ(y + 1)``. With a predicted rate (e.g.
    :meth:`pnsolve.likelihoods.Poisson.predict`) this is the plug-in test
    log-likelihood, not the log of the latent-averaged predictive distribution.

    Parameters
    ----------
    rate
        Positive rates, shape ``(t,)``.
    y
        Non-negative integer counts, shape ``(t,)``.
    """
    y = check_counts(y, "y")
    rate, y = _regression_pair(rate, y, "rate")
    if not bool((rate > 0).all()):
        raise ValueError("rate must be positive")
    return float((y * rate.log() - rate - torch.lgamma(y + 1)).mean())
