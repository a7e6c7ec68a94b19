"""The posterior predictive over hyperparameter samples (Filippone & Engler 2015, eqs. 2–3)
and type-II ML."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.bayes import (
    LogHyperparameters,
    MixturePredictive,
    exact_log_marginal,
    mixture_predictive,
    type_ii_maximum_likelihood,
)
from pnsolve.testing import exact_tol, iterative_tol, rtol_for
from pnsolve.testing.device import suite_device

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64


def _data(n=60, t=15, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n + t, 2, generator=g, dtype=F64)
    y = torch.sin(4 * X[:, 0]) + 0.1 * torch.randn(n + t, generator=g, dtype=F64)
    return X[:n], y[:n], X[n:], y[n:]


def _params():
    return LogHyperparameters(pn.kernels.RBF(lengthscale=0.5), 0.05, parametrization="log_tau")


def test_one_sample_is_the_gp_predictive_with_noise():
    X, y, Xs, _ = _data()
    params = _params()
    theta = params.initial().to(suite_device())
    pred = mixture_predictive(params, theta.unsqueeze(0), X, y, Xs)
    post = pn.gp.ExactGP(pn.kernels.RBF(lengthscale=0.5), 0.05).fit(X, y).posterior(Xs)
    torch.testing.assert_close(pred.mean, post.mean, rtol=rtol_for(F64), atol=exact_tol(F64, 60))
    torch.testing.assert_close(
        pred.var, post.var + 0.05, rtol=rtol_for(F64), atol=exact_tol(F64, 60)
    )


def test_mixture_moments_and_log_likelihood_by_hand():
    means = torch.tensor([[0.0, 1.0], [2.0, 1.0]], dtype=F64)
    variances = torch.tensor([[1.0, 0.5], [1.0, 2.0]], dtype=F64)
    pred = MixturePredictive(means, variances)
    torch.testing.assert_close(pred.mean, torch.tensor([1.0, 1.0], dtype=F64))
    torch.testing.assert_close(pred.var, torch.tensor([2.0, 1.25], dtype=F64))
    y = torch.tensor([0.5, 1.5], dtype=F64)

    def normal(x, m, v):
        return math.exp(-0.5 * (x - m) ** 2 / v) / math.sqrt(2 * math.pi * v)

    by_hand = [
        math.log(0.5 * (normal(0.5, 0, 1) + normal(0.5, 2, 1))),
        math.log(0.5 * (normal(1.5, 1, 0.5) + normal(1.5, 1, 2))),
    ]
    assert pred.log_likelihood(y) == pytest.approx(sum(by_hand) / 2, rel=rtol_for(F64))


def test_itergp_predictive_has_the_exact_mean_and_a_wider_variance():
    # CG converges in the mean; IterGP's variance keeps the computational part left
    # outside the Krylov space of y, so it is at least the exact one
    X, y, Xs, _ = _data()
    params = _params()
    thetas = params.initial().to(suite_device()) + torch.tensor(
        [[0.0, 0.0, 0.0], [0.1, -0.2, 0.3]], dtype=F64
    )
    exact = mixture_predictive(params, thetas, X, y, Xs, method="exact")
    it = mixture_predictive(params, thetas, X, y, Xs, method="itergp", iterations=60, rtol=1e-13)
    torch.testing.assert_close(it.mean, exact.mean, rtol=0, atol=iterative_tol(F64))
    assert bool((it.variances >= exact.variances - iterative_tol(F64)).all())


def test_samples_are_thinned_evenly_and_chains_pooled():
    X, y, Xs, _ = _data()
    params = _params()
    thetas = params.initial().to(suite_device()) + 0.01 * torch.arange(12, dtype=F64).reshape(
        2, 6, 1
    )
    pred = mixture_predictive(params, thetas, X, y, Xs, max_samples=4)
    assert pred.means.shape == (4, Xs.shape[0])


def test_type_ii_ml_is_a_stationary_point_and_beats_the_start():
    X, y, _, _ = _data()
    params = _params()
    theta = type_ii_maximum_likelihood(params, X, y)
    value, grad = exact_log_marginal(params, X, y, theta, grad=True)
    start, _ = exact_log_marginal(params, X, y, params.initial().to(suite_device()))
    assert value >= start
    # L-BFGS-B's default projected-gradient tolerance is 1e-5 on the objective's scale
    assert float(grad.abs().max()) <= math.sqrt(rtol_for(F64)) * (1 + abs(value))


def test_bad_arguments():
    X, y, Xs, _ = _data()
    with pytest.raises(ValueError, match="method"):
        mixture_predictive(
            _params(), _params().initial().to(suite_device())[None], X, y, Xs, method="svgp"
        )
    with pytest.raises(ValueError, match="no samples"):
        mixture_predictive(_params(), torch.empty(0, 3, dtype=F64), X, y, Xs)
