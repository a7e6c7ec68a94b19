"""Regression metrics: RMSE and SMAE against hand computations; bad input."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn

F64 = torch.float64


def test_rmse_and_smae_hand_computed():
    a = torch.tensor([1.0, 2.0, 4.0], dtype=F64)
    b = torch.tensor([1.0, 3.0, 2.0], dtype=F64)
    assert pn.metrics.rmse(a, b) == pytest.approx(math.sqrt(5 / 3), rel=1e-15)
    y = torch.tensor([0.0, 2.0], dtype=F64)  # population variance 1
    assert pn.metrics.smae(a, b, y) == pytest.approx(1.0, rel=1e-15)
    assert pn.metrics.smae(a, b, 3 * y) == pytest.approx(1 / 9, rel=1e-15)
    assert pn.metrics.smae(a, a, y) == 0.0


@pytest.mark.parametrize(
    "args,match",
    [
        ((torch.ones(3), torch.ones(2), torch.arange(3.0)), "same shape"),
        ((torch.ones(3), torch.ones(3), torch.ones(3)), "constant"),
        ((torch.ones(3), torch.ones(3), torch.ones(1)), "at least 2"),
        ((torch.tensor([1.0, math.nan]), torch.ones(2), torch.arange(3.0)), "estimate"),
        (([1.0, 2.0], torch.ones(2), torch.arange(3.0)), "estimate"),
    ],
)
def test_smae_bad_input(args, match):
    with pytest.raises((ValueError, TypeError), match=match):
        pn.metrics.smae(*args)


def test_rmse_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        pn.metrics.rmse(torch.ones(2, 2), torch.ones(2, 2))
    with pytest.raises(ValueError, match="empty"):
        pn.metrics.rmse(torch.ones(0), torch.ones(0))
