"""ExactGP: the Cholesky reference against hand-written dense formulas."""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import multivariate_normal

import pnsolve as pn
from pnsolve.testing import exact_tol, krylov_tol

F64 = torch.float64


def _data(n=40, t=7, d=2, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(5 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    Xs = torch.rand(t, d, generator=g, dtype=F64)
    return X.to(dtype), y.to(dtype), Xs.to(dtype)


def _kernel():
    return pn.kernels.Matern(nu=1.5, lengthscale=0.4, outputscale=1.3)


def test_posterior_matches_dense_formulas():
    X, y, Xs = _data()
    k, noise, mu = _kernel(), 0.05, 0.2
    gp = pn.gp.ExactGP(k, noise=noise, mean=mu).fit(X, y)
    post = gp.posterior(Xs)
    with torch.no_grad():
        Khat = k(X) + noise * torch.eye(X.shape[0], dtype=F64)
        Ksx = k(Xs, X)
        mean = mu + Ksx @ torch.linalg.solve(Khat, y - mu)
        cov = k(Xs) - Ksx @ torch.linalg.solve(Khat, Ksx.mT)
    tol = krylov_tol(F64, float(torch.linalg.cond(Khat)))
    assert float((post.mean - mean).abs().max()) <= tol
    assert float((post.var - torch.diagonal(cov)).abs().max()) <= tol
    assert float((post.cov() - cov).abs().max()) <= tol
    assert torch.equal(post.math_var, post.var) and float(post.comp_var.abs().max()) == 0.0


def test_log_marginal_likelihood_matches_scipy_and_has_gradients():
    X, y, _ = _data(n=30)
    k, noise = _kernel(), 0.1
    gp = pn.gp.ExactGP(k, noise=noise).fit(X, y)
    lml = gp.log_marginal_likelihood()
    with torch.no_grad():
        C = (k(X) + noise * torch.eye(30, dtype=F64)).numpy()
    ref = multivariate_normal(mean=None, cov=C).logpdf(y.numpy())
    assert abs(float(lml.detach()) - ref) <= exact_tol(F64, 30) * max(1.0, abs(ref)) * 100
    lml.backward()
    assert k.raw_lengthscale.grad is not None and math.isfinite(float(k.raw_lengthscale.grad))


@pytest.mark.statistical
def test_sample_moments():
    X, y, Xs = _data(t=3)
    post = pn.gp.ExactGP(_kernel(), noise=0.05).fit(X, y).posterior(Xs)
    S = post.sample(4000, generator=torch.Generator().manual_seed(0))
    assert S.shape == (3, 4000)
    z = (S.mean(1) - post.mean) / (post.var.sqrt() / math.sqrt(4000))
    assert float(z.abs().max()) <= pn.testing.statistical_threshold(1e-3 / 3)


def test_float32_follows_inputs():
    X, y, Xs = _data(dtype=torch.float32)
    post = pn.gp.ExactGP(_kernel(), noise=0.1).fit(X, y).posterior(Xs)
    assert post.mean.dtype == torch.float32 and post.var.dtype == torch.float32


def test_bad_input():
    X, y, Xs = _data()
    gp = pn.gp.ExactGP(_kernel(), noise=0.1)
    with pytest.raises(RuntimeError, match="fit"):
        gp.posterior(Xs)
    with pytest.raises(ValueError, match="noise"):
        pn.gp.ExactGP(_kernel(), noise=0.0)
    with pytest.raises(TypeError, match="kernel"):
        pn.gp.ExactGP("rbf", noise=0.1)
    with pytest.raises(ValueError, match="y must have shape"):
        gp.fit(X, y[:-1])
    gp.fit(X, y)
    with pytest.raises(ValueError, match="Xs must have 2 columns"):
        gp.posterior(torch.rand(3, 3, dtype=F64))
    with pytest.raises(ValueError, match="Xs contains NaN"):
        gp.posterior(torch.full((2, 2), float("nan"), dtype=F64))
    with pytest.raises(ValueError, match="method"):
        gp.posterior(Xs, method="nope")


def test_fit_exact_hyperparameters_raises_likelihood_and_noise_gradient():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(60, 2, generator=g, dtype=torch.float64)
    y = torch.sin(4 * X[:, 0]) + 0.2 * torch.randn(60, generator=g, dtype=torch.float64)
    k = pn.kernels.RBF(lengthscale=torch.ones(2, dtype=torch.float64))
    fit = pn.gp.fit_exact_hyperparameters(k, X, y, noise=1.0, steps=30, lr=0.1)
    assert fit.kernel is k and len(fit.log_marginal_likelihood) == 30
    assert fit.log_marginal_likelihood[-1] > fit.log_marginal_likelihood[0]
    assert fit.noise < 1.0  # the data are far less noisy than the start
    # the LML accepts a differentiable noise tensor
    log_noise = torch.tensor(-2.0, dtype=torch.float64, requires_grad=True)
    gp = pn.gp.ExactGP(k, noise=0.1).fit(X, y)
    gp.log_marginal_likelihood(noise=log_noise.exp()).backward()
    assert log_noise.grad is not None and torch.isfinite(log_noise.grad)
    with pytest.raises(ValueError, match="steps"):
        pn.gp.fit_exact_hyperparameters(k, X, y, steps=0)
    with pytest.raises(ValueError, match="noise"):
        pn.gp.fit_exact_hyperparameters(k, X, y, noise=-1.0)
    with pytest.raises(ValueError, match="noise"):
        gp.log_marginal_likelihood(noise=torch.tensor([0.1, 0.2]))
