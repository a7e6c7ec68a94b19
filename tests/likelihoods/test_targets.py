"""Target validation and argument checks: every error names the argument."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.likelihoods import Bernoulli, Gaussian, Poisson, Softmax


def test_likelihoods_are_registered():
    assert pn.likelihoods.Likelihood in type(Bernoulli()).__mro__
    assert [Gaussian().num_latent, Bernoulli().num_latent, Poisson().num_latent] == [1, 1, 1]
    assert Softmax(4).num_latent == 4 == Softmax(4).num_classes
    assert "Softmax(num_classes=4)" == repr(Softmax(4))


def test_check_targets_accepts_and_converts():
    b = Bernoulli()
    for y in (torch.tensor([True, False]), torch.tensor([1, 0]), torch.tensor([1.0, 0.0])):
        out = b.check_targets(y)
        assert out.is_floating_point() and out.tolist() == [1.0, 0.0]
    assert b.check_targets(torch.tensor([1.0, 0.0], dtype=torch.float32)).dtype == torch.float32
    out = Softmax(3).check_targets(torch.tensor([2.0, 0.0, 1.0]))
    assert out.dtype == torch.int64 and out.tolist() == [2, 0, 1]
    assert Poisson().check_targets(torch.tensor([0, 3, 7])).tolist() == [0.0, 3.0, 7.0]
    assert Gaussian().check_targets(torch.tensor([1, -2])).is_floating_point()


@pytest.mark.parametrize(
    "lik,y,exc,match",
    [
        (Bernoulli(), torch.tensor([1, -1]), ValueError, r"y must hold binary.*\(y \+ 1\) / 2"),
        (Bernoulli(), torch.tensor([0.5, 1.0]), ValueError, "y must hold binary"),
        (Bernoulli(), torch.tensor([[1, 0]]), ValueError, "y must have shape"),
        (Bernoulli(), [1, 0], TypeError, "y must be a torch.Tensor"),
        (Softmax(3), torch.tensor([0, 3]), ValueError, "y must hold class indices"),
        (Softmax(3), torch.tensor([0, -1]), ValueError, "y must hold class indices"),
        (Softmax(3), torch.tensor([0.5, 1.0]), ValueError, "y must hold integer class"),
        (Softmax(3), torch.tensor([True]), TypeError, "y must hold integer class"),
        (Poisson(), torch.tensor([1.5, 2.0]), ValueError, "y must hold non-negative integer"),
        (Poisson(), torch.tensor([-1, 2]), ValueError, "y must hold non-negative integer"),
        (Gaussian(), torch.tensor([math.nan, 2.0]), ValueError, "y contains NaN"),
        (Gaussian(), torch.tensor([math.inf, 2.0]), ValueError, "y contains Inf"),
    ],
)
def test_check_targets_rejects(lik, y, exc, match):
    with pytest.raises(exc, match=match):
        lik.check_targets(y)


def test_latent_argument_checks():
    b = Bernoulli()
    y = torch.tensor([0, 1, 1])
    with pytest.raises(ValueError, match="f must have shape"):
        b.gradient(torch.zeros(3, 1), y)
    with pytest.raises(TypeError, match="f must have a floating"):
        b.gradient(torch.zeros(3, dtype=torch.int64), y)
    with pytest.raises(ValueError, match="f contains NaN"):
        b.hessian(torch.tensor([0.0, math.nan, 1.0]), y)
    with pytest.raises(ValueError, match="y has 3 targets but f has 2"):
        b.noise(torch.zeros(2), y)
    with pytest.raises(ValueError, match=r"f must have shape \(n, 3\)"):
        Softmax(3).log_likelihood(torch.zeros(3, 2), y)
    with pytest.raises(ValueError, match="flat"):
        Softmax(3).unflatten(torch.zeros(4))


@pytest.mark.parametrize(
    "make,exc,match",
    [
        (lambda: Gaussian(noise=0.0), ValueError, "noise"),
        (lambda: Gaussian(noise=-1.0), ValueError, "noise"),
        (lambda: Gaussian(noise="1"), TypeError, "noise"),
        (lambda: Gaussian(noise=torch.ones(2)), ValueError, "noise"),
        (lambda: Bernoulli(link="cloglog"), ValueError, "link"),
        (lambda: Softmax(1), ValueError, "num_classes"),
        (lambda: Softmax(2.0), TypeError, "num_classes"),
    ],
)
def test_constructor_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_outputs_follow_latent_dtype(dtype):
    f = torch.linspace(-2, 2, 6, dtype=dtype)
    y = torch.tensor([0, 1, 0, 1, 1, 0])
    for lik in (Gaussian(0.5), Bernoulli(), Bernoulli("probit"), Poisson()):
        for out in (lik.log_likelihood(f, y), lik.gradient(f, y)):
            assert out.dtype == dtype and out.shape == (6,)
        for op in (lik.hessian(f, y), lik.noise(f, y)):
            assert op.dtype == dtype and op.shape == (6, 6)
    F = f.reshape(3, 2)
    sm = Softmax(2)
    assert sm.gradient(F, y[:3]).dtype == dtype
    assert sm.noise(F, y[:3]).dtype == dtype and sm.noise(F, y[:3]).shape == (6, 6)
