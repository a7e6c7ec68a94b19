"""IterGP: computation-aware posteriors that query the solver's belief."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import krylov_tol, statistical_threshold

F64 = torch.float64


def _data(n=60, t=9, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(5 * X[:, 0]) * torch.cos(3 * X[:, 1]) + 0.1 * torch.randn(
        n, generator=g, dtype=F64
    )
    Xs = torch.rand(t, d, generator=g, dtype=F64)
    return X, y, Xs


KERNEL = dict(lengthscale=0.3, outputscale=1.0)
NOISE = 0.01


def _itergp(policy, budget, backend="auto"):
    k = pn.kernels.RBF(**KERNEL)
    return pn.gp.IterGP(k, NOISE, policy, pn.stopping.MaxIterations(budget), backend=backend)


def _exact(X, y):
    return pn.gp.ExactGP(pn.kernels.RBF(**KERNEL), NOISE).fit(X, y)


def _tol(X):
    with torch.no_grad():
        K = pn.kernels.RBF(**KERNEL)(X) + NOISE * torch.eye(X.shape[0], dtype=F64)
    return krylov_tol(F64, float(torch.linalg.cond(K)))


@pytest.mark.parametrize("order", ["sequential", "pivot"])
def test_full_budget_reproduces_exact_gp(order):
    X, y, Xs = _data()
    exact = _exact(X, y).posterior(Xs)
    post = _itergp(pn.policies.UnitVector(order), X.shape[0]).fit(X, y).posterior(Xs)
    tol = _tol(X)
    assert float((post.mean - exact.mean).abs().max()) <= tol
    assert float((post.var - exact.var).abs().max()) <= tol
    assert float((post.cov() - exact.cov()).abs().max()) <= tol
    assert float(post.comp_var.abs().max()) <= tol


def test_combined_variance_splits_and_bounds_the_exact_one():
    X, y, Xs = _data()
    exact = _exact(X, y).posterior(Xs)
    post = _itergp(pn.policies.CG(), 8).fit(X, y).posterior(Xs)
    tol = _tol(X)
    assert bool((post.var >= exact.var - tol).all())
    assert float((post.math_var - exact.var).abs().max()) <= tol
    assert float((post.var - (post.math_var + post.comp_var)).abs().max()) <= tol
    assert bool((post.comp_var >= -tol).all())


def test_variance_never_increases_and_comp_var_vanishes_with_budget():
    X, y, Xs = _data(n=40)
    gp = _itergp(pn.policies.UnitVector("random"), 40)
    g = torch.Generator().manual_seed(1)
    variances, comps = [], []
    for state, post in gp.iterate(X, y, Xs, generator=g):
        variances.append(post.var)
        if state.iteration % 10 == 0:
            comps.append(float(post.comp_var.max()))
    V = torch.stack(variances)
    tol = _tol(X)
    assert bool((V[1:] <= V[:-1] + tol).all())
    assert all(b <= a + tol for a, b in itertools.pairwise(comps))
    assert comps[-1] <= tol and comps[0] > 10 * tol
    with torch.no_grad():
        prior = pn.kernels.RBF(**KERNEL).diag(Xs)
    assert float((V[0] - prior).abs().max()) == 0.0


def test_cg_policy_converges_to_the_exact_gp():
    """CG minimises the K̂-norm error of the representer weights: monotone in the budget."""
    X, y, Xs = _data()
    exact_gp = _exact(X, y)
    exact = exact_gp.posterior(Xs)
    with torch.no_grad():
        Khat = pn.kernels.RBF(**KERNEL)(X) + NOISE * torch.eye(X.shape[0], dtype=F64)
    errs = []
    for budget in (2, 10, 40):
        gp = _itergp(pn.policies.CG(), budget).fit(X, y)
        e = gp.belief.mean - exact_gp.weights
        errs.append(float(e @ Khat @ e) ** 0.5)
    assert errs[0] > errs[1] > errs[2]
    post = _itergp(pn.policies.CG(), X.shape[0]).fit(X, y).posterior(Xs)
    assert float((post.mean - exact.mean).abs().max()) <= 1e3 * _tol(X)


def test_matrix_free_backend_agrees_with_dense():
    X, y, Xs = _data()
    dense = _itergp(pn.policies.CG(), 15, backend="dense").fit(X, y).posterior(Xs)
    free = _itergp(pn.policies.CG(), 15, backend="chunked").fit(X, y).posterior(Xs)
    tol = _tol(X)
    assert float((dense.mean - free.mean).abs().max()) <= tol
    assert float((dense.var - free.var).abs().max()) <= tol


@pytest.mark.slow
@pytest.mark.statistical
def test_calibration_on_prior_draws():
    """f ~ GP prior, y = f(X) + ε: standardized errors under the combined variance.

    With a non-adaptive policy (random unit vectors) the combined posterior is the
    exact posterior given the observed projections of y, so z = (f(x*) − m)/s has
    E[z²] = 1. Over N draws × t test points the mean of z² is compared with 1 using
    its standard error (two-sided z-test, false-alarm level 1e-3).
    """
    n, t, d, draws = 30, 5, 1, 400
    g = torch.Generator().manual_seed(2)
    k = pn.kernels.RBF(lengthscale=0.3)
    z2 = []
    for _ in range(draws):
        Z = torch.rand(n + t, d, generator=g, dtype=F64)
        with torch.no_grad():
            C = k(Z) + 1e-10 * torch.eye(n + t, dtype=F64)
        f = torch.linalg.cholesky(C) @ torch.randn(n + t, generator=g, dtype=F64)
        X, Xs = Z[:n], Z[n:]
        y = f[:n] + math.sqrt(NOISE) * torch.randn(n, generator=g, dtype=F64)
        gp = pn.gp.IterGP(k, NOISE, pn.policies.UnitVector("random"), pn.stopping.MaxIterations(6))
        post = gp.fit(X, y, generator=g).posterior(Xs)
        z2.append((f[n:] - post.mean) ** 2 / post.var)
    z2 = torch.cat(z2)
    stat = (z2.mean() - 1.0) / (z2.std() / math.sqrt(z2.numel()))
    assert abs(float(stat)) <= statistical_threshold(1e-3)


def test_iterate_records_info_and_one_product_per_iteration():
    X, y, Xs = _data(n=30)
    gp = _itergp(pn.policies.CG(), 5)
    states = [s for s, _ in gp.iterate(X, y, Xs)]
    assert [s.iteration for s in states] == list(range(6))
    assert gp.info.iterations == 5 and gp.info.products == 5
    # the whole residual history (it used to hold only the last norm), equal to fit()'s
    torch.testing.assert_close(
        gp.info.residual_norms, torch.stack([s.residual_norm for s in states])
    )
    fitted = _itergp(pn.policies.CG(), 5).fit(X, y)
    torch.testing.assert_close(gp.info.residual_norms, fitted.info.residual_norms)


def test_bad_input():
    X, y, Xs = _data()
    gp = _itergp(pn.policies.CG(), 5)
    with pytest.raises(RuntimeError, match="fit"):
        gp.posterior(Xs)
    with pytest.raises(TypeError, match="policy"):
        pn.gp.IterGP(pn.kernels.RBF(), 0.1, "cg", pn.stopping.MaxIterations(3))
    with pytest.raises(ValueError, match="noise"):
        pn.gp.IterGP(pn.kernels.RBF(), -1.0, pn.policies.CG(), pn.stopping.MaxIterations(3))
    gp.fit(X, y)
    with pytest.raises(TypeError, match="Xs has dtype"):
        gp.posterior(Xs.float())
