"""CaGP's posterior, its behaviour under change, its calibration flag and bad input."""

from __future__ import annotations

import pytest
import torch
from cagp_data import F64, data, gen

import pnsolve as pn
from pnsolve.gp.fit_state import FitChangedError
from pnsolve.metrics import prior_draw_calibration
from pnsolve.testing import exact_tol, krylov_tol, statistical_threshold
from pnsolve.testing.calibration import assert_calibrated

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(i: int = 8, **kwargs) -> pn.gp.CaGP:
    kwargs.setdefault("backend", "dense")
    return pn.gp.CaGP(pn.kernels.RBF(lengthscale=0.3, outputscale=1.3), 0.05, i, mean=0.2, **kwargs)


def _dense_posterior(m: pn.gp.CaGP, X, y, Xs, S):
    """Mean and variance of the GP posterior given ``Sᵀy``, by dense algebra."""
    with torch.no_grad():
        K, Kx = m.kernel(X), m.kernel(Xs, X)
        G_hat = S.mT @ (K + m.noise * torch.eye(X.shape[0], dtype=F64)) @ S
        mean = m.mean + Kx @ S @ torch.linalg.solve(G_hat, S.mT @ (y - m.mean))
        var = m.kernel.diag(Xs) - ((Kx @ S) @ torch.linalg.inv(G_hat) * (Kx @ S)).sum(1)
    return mean, var


def _tol(m, X) -> float:
    return krylov_tol(F64, float(torch.linalg.cond(m.system(X).to_dense())))


def test_the_posterior_is_the_gp_posterior_given_the_projected_data():
    X, y = data(50)
    Xs, _ = data(20, seed=1)
    m = _model().fit(X, y, steps=0, generator=gen(1))
    post = m.posterior(Xs)
    mean, var = _dense_posterior(m, X, y, Xs, m.pattern.dense(m.action_values))
    tol = _tol(m, X)
    torch.testing.assert_close(post.mean, mean, rtol=tol, atol=tol)
    torch.testing.assert_close(post.var, var, rtol=tol, atol=tol)
    torch.testing.assert_close(post.cov().diagonal(), var, rtol=tol, atol=tol)


def test_with_all_n_one_point_actions_it_is_the_exact_gp():
    X, y = data(40)
    Xs, _ = data(15, seed=1)
    m = _model(40).fit(X, y, steps=0, generator=gen(1))
    with torch.no_grad():
        m.action_values.fill_(1.0)
    post = m.posterior(Xs)
    exact = pn.gp.ExactGP(pn.kernels.RBF(lengthscale=0.3, outputscale=1.3), 0.05, mean=0.2)
    ref = exact.fit(X, y).posterior(Xs)
    tol = _tol(m, X)
    torch.testing.assert_close(post.mean, ref.mean, rtol=tol, atol=tol)
    torch.testing.assert_close(post.var, ref.var, rtol=tol, atol=tol)


@pytest.mark.parametrize("i", [1, 5, 20])
def test_the_variance_is_never_below_the_exact_gp_s(i):
    X, y = data(60)
    Xs, _ = data(25, seed=2)
    m = _model(i).fit(X, y, steps=5, generator=gen(1))
    post = m.posterior(Xs)
    assert float(post.comp_var.min()) >= -exact_tol(F64, 60) * float(post.var.max())
    torch.testing.assert_close(post.var - post.comp_var, post.math_var)


def test_a_query_after_the_hyperparameters_or_actions_changed_recomputes():
    X, y = data(50)
    Xs, _ = data(10, seed=1)
    m = _model().fit(X, y, steps=3, generator=gen(1))
    before = m.posterior(Xs)
    m.kernel.lengthscale = 0.5
    after = m.posterior(Xs)
    mean, _ = _dense_posterior(m, X, y, Xs, m.pattern.dense(m.action_values))
    torch.testing.assert_close(after.mean, mean, rtol=_tol(m, X), atol=_tol(m, X))
    assert not torch.allclose(after.mean, before.mean)
    with pytest.raises(FitChangedError):
        before.math_var  # noqa: B018  (the old posterior refuses its on-demand parts)
    with torch.no_grad():
        m.action_values.mul_(-1.5)  # the actions written: same span, same posterior
    again = m.posterior(Xs)
    torch.testing.assert_close(again.mean, mean, rtol=_tol(m, X), atol=_tol(m, X))
    m.noise = 0.2
    assert m.fit_state.provenance is not None and m.noise == pytest.approx(0.2)
    mean_noise, _ = _dense_posterior(m, X, y, Xs, m.pattern.dense(m.action_values))
    torch.testing.assert_close(m.posterior(Xs).mean, mean_noise, rtol=_tol(m, X), atol=_tol(m, X))


def test_learned_and_adaptive_actions_are_not_calibrated_random_krylov_ones_are():
    X, y = data(40)
    Xs, _ = data(5, seed=1)
    assert not _model().fit(X, y, steps=0, generator=gen(1)).posterior(Xs).calibrated
    cg = _model(5, actions=pn.policies.CG()).fit(X, y, steps=0, generator=gen(1))
    assert not cg.posterior(Xs).calibrated
    lanczos = _model(5, actions=pn.policies.Lanczos(start="random"))
    assert lanczos.fit(X, y, steps=0, generator=gen(1)).posterior(Xs).calibrated


@pytest.mark.statistical
def test_fixed_random_krylov_actions_give_a_calibrated_posterior():
    """Lanczos from a random start: actions independent of y, so on prior draws the
    standardised errors are standard normal (false alarm 1e-3 per check)."""
    kernel = pn.kernels.Matern(nu=1.5, lengthscale=0.3)
    noise = 0.05
    g = gen(5)
    X = torch.rand(80, 2, generator=g, dtype=F64)
    Xs = torch.rand(30, 2, generator=g, dtype=F64)
    seeds = iter(range(10_000))

    def posterior(X, y, Xs):
        m = pn.gp.CaGP(kernel, noise, 6, actions=pn.policies.Lanczos(start="random"),
                       backend="dense")  # fmt: skip
        m.fit(X, y, steps=0, generator=gen(next(seeds)))
        return m.posterior(Xs)

    stats = prior_draw_calibration(kernel, noise, X, Xs, posterior, draws=200, generator=gen(6))
    z = statistical_threshold(1e-3)
    for kind in ("computational", "combined"):
        assert_calibrated(stats[kind], z, 0.95)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: _model(actions="dense"), TypeError, "actions must be 'sparse'"),
        (lambda: _model(blocks="grid"), ValueError, "blocks"),
        (lambda: _model(0), ValueError, "num_actions"),
        (lambda: _model(backend="gpu"), ValueError, "backend"),
        (lambda: pn.gp.CaGP(pn.kernels.RBF(), -1.0, 3), ValueError, "noise"),
    ],
)
def test_bad_settings_are_refused_by_name(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_bad_use_is_refused_by_name():
    X, y = data(20)
    m = _model(30)
    with pytest.raises(ValueError, match="num_actions must be at most n = 20"):
        m.fit(X, y, steps=0, generator=gen(1))
    m = _model(4)
    with pytest.raises(RuntimeError, match="call fit"):
        m.elbo(X, y)
    with pytest.raises(RuntimeError, match="call fit"):
        m.posterior(X)
    m.fit(X, y, steps=0, generator=gen(1))
    with pytest.raises(ValueError, match="X must have the 20 rows"):
        m.elbo(X[:10], y[:10])
    with pytest.raises(ValueError, match="Xs must have 2 columns"):
        m.posterior(torch.zeros(3, 5, dtype=F64))
