"""QSGP: exact identities (full batches, the optimal q, posterior variances)."""

from __future__ import annotations

import math

import pytest
import torch

from pnsolve.testing import exact_tol, rtol_for, statistical_threshold

pytestmark = pytest.mark.usefixtures("one_thread")
F64 = torch.float64
TOL = rtol_for(F64)


@pytest.mark.parametrize("likelihood", ["gaussian", "bernoulli", "poisson"])
@pytest.mark.parametrize("covariance", ["diagonal", "chevron", "full"])
def test_a_full_batch_estimate_is_the_exact_elbo(likelihood, covariance, problem, model):
    """ñ ≥ n and m̃ ≥ m take every index once: the estimators (and Theorem 3's bound,
    whose Jensen gap closes) equal the exact ELBO, control variates included."""
    X, y = problem(likelihood)
    q = model(likelihood, covariance=covariance, X=X, batch_size=10**6,
              feature_batch_size=10**6, control_variate_rank=20)  # fmt: skip
    exact = q.elbo(X, y)
    est = q.elbo_estimate(X, y, generator=torch.Generator().manual_seed(0))
    assert est == pytest.approx(exact, rel=TOL, abs=TOL)


def test_the_optimal_q_attains_the_log_marginal_likelihood(problem, model):
    """With a Gaussian likelihood and full C, q = N(A⁻¹Φᵀy/σ², A⁻¹) (A = ΦᵀΦ/σ² + I) is
    the exact weight-space posterior and the ELBO equals log N(y | 0, ΦΦᵀ + σ²I)."""
    X, y = problem("gaussian", n=60)
    q = model("gaussian", m=25, covariance="full", X=X, randomise=False)
    Phi = q.features.block(X).detach()
    s2 = q.noise
    A = Phi.mT @ Phi / s2 + torch.eye(25, dtype=F64)
    L = torch.linalg.cholesky(torch.linalg.inv(A))
    with torch.no_grad():
        q.mean_weights.copy_(torch.linalg.solve(A, Phi.mT @ y / s2))
        q.cov.log_diag.copy_(torch.log(torch.diagonal(L)))
        q.cov.lower.copy_(torch.tril(L, -1))
    K = Phi @ Phi.mT + s2 * torch.eye(60, dtype=F64)
    lml = torch.distributions.MultivariateNormal(torch.zeros(60, dtype=F64), K).log_prob(y)
    assert q.elbo(X, y) == pytest.approx(float(lml), rel=TOL)
    torch.testing.assert_close(q.cov.matrix() @ q.cov.matrix().mT, torch.linalg.inv(A))


def test_the_elbo_optimal_mean_is_the_weight_space_posterior_mean(problem, model):
    """The exact ELBO's gradient in μ vanishes at the posterior mean (Gaussian
    likelihood, any C), and nowhere else along a random direction."""
    X, y = problem("gaussian", n=60)
    q = model("gaussian", m=25, covariance="chevron", X=X)
    Phi = q.features.block(X).detach()
    s2 = q.noise
    A = Phi.mT @ Phi / s2 + torch.eye(25, dtype=F64)
    mean = torch.linalg.solve(A, Phi.mT @ y / s2)
    from pnsolve.gp.qsgp.exact import exact_elbo

    def grad_at(mu):
        mu = mu.clone().requires_grad_(True)
        value = exact_elbo(q.features, q.cov, mu, torch.tensor(s2, dtype=F64), q.likelihood,
                           X, y, q.quadrature(X))  # fmt: skip
        (g,) = torch.autograd.grad(value, mu)
        return g

    assert float(grad_at(mean).abs().max()) <= TOL * float(grad_at(0 * mean).abs().max())
    assert float(grad_at(mean + 0.1).abs().max()) > 1e-3


@pytest.mark.parametrize("covariance", ["diagonal", "chevron", "full"])
def test_posterior_variances_are_the_diagonal_of_phi_sigma_phi(covariance, problem, model):
    X, _ = problem("gaussian")
    q = model("gaussian", covariance=covariance, X=X)
    Xs = torch.randn(17, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    post = q.posterior(Xs)
    Phi = q.features.block(Xs).detach()
    C = q.cov.matrix()
    cov = Phi @ C @ C.mT @ Phi.mT
    torch.testing.assert_close(post.mean, Phi @ q.mean_weights)
    torch.testing.assert_close(post.var, torch.diagonal(cov))
    torch.testing.assert_close(post.cov(), cov)


def test_predict_proba_is_the_expected_sigmoid(problem, model):
    X, _ = problem("bernoulli")
    q = model("bernoulli", X=X)
    Xs = torch.randn(9, 2, generator=torch.Generator().manual_seed(6), dtype=F64)
    post = q.posterior(Xs)
    z = torch.randn(200_000, generator=torch.Generator().manual_seed(7), dtype=F64)
    mc = torch.sigmoid(post.mean.unsqueeze(1) + post.std.unsqueeze(1) * z).mean(1)
    p = q.predict_proba(Xs)
    assert bool(((p > 0) & (p < 1)).all())
    # Monte Carlo error: sd(sigmoid) ≤ 1/2; two-sided, Bonferroni over the 9 points
    atol = statistical_threshold(1e-4 / 9) * 0.5 / math.sqrt(200_000)
    torch.testing.assert_close(p, mc, rtol=0, atol=atol)


@pytest.mark.parametrize("covariance", ["diagonal", "chevron"])
def test_proposition_1_is_the_optimum_of_the_diagonal_columns(covariance, problem, model):
    """After ``closed_form_diagonal`` the exact ELBO's gradient in ``log c_rr`` vanishes
    for every diagonal-only column (r ≥ R), and not before."""
    X, y = problem("gaussian", n=60)
    q = model("gaussian", m=25, covariance=covariance, X=X)
    from pnsolve.gp.qsgp.exact import exact_elbo

    def grad():
        ld = q.cov.log_diag.clone().requires_grad_(True)
        saved = q.cov.log_diag
        q.cov.log_diag = ld
        try:
            value = exact_elbo(q.features, q.cov, q.mean_weights, torch.tensor(q.noise, dtype=F64),
                               q.likelihood, X, y, q.quadrature(X))  # fmt: skip
            (g,) = torch.autograd.grad(value, ld)
        finally:
            q.cov.log_diag = saved
        return g[q.cov.R :]

    before = grad()
    q.closed_form_diagonal(X, y)
    after = grad()
    assert float(before.abs().max()) > 0.1
    assert float(after.abs().max()) <= exact_tol(F64, X.shape[0] * q.m) * float(before.abs().max())


def test_control_variates_follow_the_data(problem, model):
    """The support points index the data the control variates were built on: on other
    data (another set, fewer rows, the same rows permuted) a full batch must still be the
    exact ELBO of *that* data, so the state is rebuilt, not reused."""
    X, y = problem("gaussian", n=60)
    q = model("gaussian", X=X, batch_size=10_000, feature_batch_size=10_000,
              control_variate_rank=20, linear_control_variate=True)  # fmt: skip
    g = torch.Generator().manual_seed(3)
    q.elbo_estimate(X, y, generator=g)  # builds them on (X, y)
    X2, y2 = problem("gaussian", n=60, seed=5)
    perm = torch.randperm(60, generator=g)
    for Xn, yn in ((X2, y2), (X2[:25], y2[:25]), (X[perm], y[perm] + 0.5)):
        exact = q.elbo(Xn, yn)
        got = q.elbo_estimate(Xn, yn, generator=g)
        assert got == pytest.approx(exact, rel=rtol_for(F64), abs=rtol_for(F64))
    # the same tensors changed in place are other data too (the digest cache must see it)
    yn.add_(0.25)
    exact = q.elbo(Xn, yn)
    assert q.elbo_estimate(Xn, yn, generator=g) == pytest.approx(
        exact, rel=rtol_for(F64), abs=rtol_for(F64)
    )
