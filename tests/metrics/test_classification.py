"""Classification metrics and test log-likelihoods: hand computations, ECE calibration, bad input.

ECE claims are statistical: for perfectly calibrated predictions each bin's summed gap
``G_b = Σ_{i∈b} (1[correct_i] − conf_i)`` has mean 0 and variance ``Σ conf(1 − conf)``,
so ``|G_b| ≤ z · sd_b`` for every bin at a family-wise false-alarm level ``1e-3``
(Bonferroni over the bins; ``z`` from ``statistical_threshold``), which bounds
``ECE ≤ z Σ_b sd_b / t``. Fixed seeds; the power check shows an overconfident predictor
exceeds the same bound.
"""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import exact_tol, statistical_threshold

F64 = torch.float64
FALSE_ALARM = 1e-3
BINS = 15


def test_accuracy_and_nll_hand_computed():
    p = torch.tensor([0.9, 0.2, 0.6, 0.5], dtype=F64)
    y = torch.tensor([1, 0, 0, 1])
    # predictions 1, 0, 1, 0 (a tie goes to class 0)
    assert pn.metrics.accuracy(p, y) == 0.5
    expected = -(math.log(0.9) + math.log(0.8) + math.log(0.4) + math.log(0.5)) / 4
    assert pn.metrics.nll(p, y) == pytest.approx(expected, rel=exact_tol(F64))
    P = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.3, 0.3, 0.4]], dtype=F64)
    y3 = torch.tensor([0, 2, 1])
    assert pn.metrics.accuracy(P, y3) == pytest.approx(2 / 3, rel=exact_tol(F64))
    expected = -(math.log(0.7) + math.log(0.6) + math.log(0.3)) / 3
    assert pn.metrics.nll(P, y3) == pytest.approx(expected, rel=exact_tol(F64))
    # bool labels and binary probs as one-column-per-class agree
    assert pn.metrics.nll(p, y.bool()) == pytest.approx(
        pn.metrics.nll(torch.stack([1 - p, p], 1), y), rel=exact_tol(F64)
    )


def test_nll_is_clamped_at_the_dtype_floor():
    for dtype in (F64, torch.float32):
        p = torch.tensor([1.0, 0.0], dtype=dtype)
        y = torch.tensor([0, 1])
        assert pn.metrics.nll(p, y) == pytest.approx(
            -math.log(torch.finfo(dtype).tiny), rel=exact_tol(dtype)
        )


def test_ece_hand_computed():
    # conf 0.9 (correct), 0.8 (wrong) → bins 14 and 12 (of 15); 0.55 ×2 (one correct) → bin 8
    P = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.55, 0.45], [0.45, 0.55]], dtype=F64)
    y = torch.tensor([0, 0, 0, 0])
    expected = (abs(1 - 0.9) + abs(0 - 0.8) + abs(1 + 0 - 0.55 - 0.55)) / 4
    assert pn.metrics.ece(P, y) == pytest.approx(expected, rel=exact_tol(F64))
    # one bin: the gap of the means
    assert pn.metrics.ece(P, y, bins=1) == pytest.approx(
        abs(0.5 - (0.9 + 0.8 + 0.55 + 0.55) / 4), rel=exact_tol(F64)
    )
    assert pn.metrics.ece(P[:, 1], y) == pytest.approx(expected, rel=exact_tol(F64))


def _calibration_bound(conf: torch.Tensor) -> float:
    idx = (torch.ceil(conf * BINS).long() - 1).clamp(0, BINS - 1)
    var = torch.zeros(BINS, dtype=conf.dtype).index_add_(0, idx, conf * (1 - conf))
    return statistical_threshold(FALSE_ALARM / BINS) * float(var.sqrt().sum()) / conf.numel()


@pytest.mark.statistical
@pytest.mark.parametrize("num_classes", [2, 5])
def test_ece_of_calibrated_predictions_is_small_and_overconfident_is_not(num_classes):
    g = torch.Generator().manual_seed(num_classes)
    t = 20_000
    logits = 1.5 * torch.randn(t, num_classes, generator=g, dtype=F64)
    probs = torch.softmax(logits, 1)
    y = torch.multinomial(probs, 1, generator=g).squeeze(1)
    conf = probs.max(1).values
    bound = _calibration_bound(conf)
    assert pn.metrics.ece(probs, y, bins=BINS) <= bound
    sharp = torch.softmax(3 * logits, 1)  # same ranking, overconfident
    assert pn.metrics.ece(sharp, y, bins=BINS) > _calibration_bound(sharp.max(1).values)
    if num_classes == 2:
        assert pn.metrics.ece(probs[:, 1], y, bins=BINS) == pytest.approx(
            pn.metrics.ece(probs, y, bins=BINS), rel=exact_tol(F64, t)
        )


def test_gaussian_and_poisson_log_likelihood_hand_computed():
    mean = torch.tensor([0.0, 1.0], dtype=F64)
    var = torch.tensor([1.0, 4.0], dtype=F64)
    y = torch.tensor([1.0, 1.0], dtype=F64)
    expected = (-0.5 * math.log(2 * math.pi) - 0.5 + -0.5 * math.log(8 * math.pi)) / 2
    assert pn.metrics.gaussian_log_likelihood(mean, var, y) == pytest.approx(
        expected, rel=exact_tol(F64)
    )
    rate = torch.tensor([2.0, 0.5], dtype=F64)
    counts = torch.tensor([3, 0])
    expected = ((3 * math.log(2) - 2 - math.log(6)) + (-0.5)) / 2
    assert pn.metrics.poisson_log_likelihood(rate, counts) == pytest.approx(
        expected, rel=exact_tol(F64)
    )


@pytest.mark.parametrize(
    "fn,args,exc,match",
    [
        ("accuracy", ([0.5], torch.tensor([1])), TypeError, "probs"),
        ("accuracy", (torch.tensor([1.5]), torch.tensor([1])), ValueError, "probs must lie"),
        ("nll", (torch.tensor([[2.0, -1.0]]), torch.tensor([1])), ValueError, "probs must lie"),
        ("nll", (torch.tensor([[0.5, 0.2]]), torch.tensor([1])), ValueError, "sum to 1"),
        ("nll", (torch.tensor([math.nan]), torch.tensor([1])), ValueError, "probs contains NaN"),
        ("nll", (torch.tensor([1]), torch.tensor([1])), TypeError, "probs must have a floating"),
        ("nll", (torch.ones(0), torch.ones(0)), ValueError, "probs is empty"),
        ("nll", (torch.ones(1, 1), torch.tensor([0])), ValueError, "probs must have shape"),
        ("ece", (torch.tensor([0.5, 0.5]), torch.tensor([1])), ValueError, "y has 1 labels"),
        ("ece", (torch.tensor([0.5]), torch.tensor([2])), ValueError, "y must hold binary"),
        ("ece", (torch.tensor([[0.5, 0.5]]), torch.tensor([2])), ValueError, "y must hold class"),
    ],
)
def test_classification_bad_input(fn, args, exc, match):
    with pytest.raises(exc, match=match):
        getattr(pn.metrics, fn)(*args)


def test_ece_bad_bins():
    with pytest.raises(ValueError, match="bins"):
        pn.metrics.ece(torch.tensor([0.5]), torch.tensor([1]), bins=0)


def test_log_likelihood_bad_input():
    m, v, y = torch.zeros(2), torch.ones(2), torch.zeros(2)
    with pytest.raises(ValueError, match="var must be positive"):
        pn.metrics.gaussian_log_likelihood(m, torch.zeros(2), y)
    with pytest.raises(ValueError, match="mean and y"):
        pn.metrics.gaussian_log_likelihood(torch.zeros(3), v, y)
    with pytest.raises(ValueError, match="var contains NaN"):
        pn.metrics.gaussian_log_likelihood(m, torch.tensor([1.0, math.nan]), y)
    with pytest.raises(TypeError, match="var has dtype"):
        pn.metrics.gaussian_log_likelihood(m, v.double(), y)
    with pytest.raises(ValueError, match="rate must be positive"):
        pn.metrics.poisson_log_likelihood(torch.zeros(2), y)
    with pytest.raises(ValueError, match="y must hold non-negative integer"):
        pn.metrics.poisson_log_likelihood(v, torch.tensor([0.5, 1.0]))
