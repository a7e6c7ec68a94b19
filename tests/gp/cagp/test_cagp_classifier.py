"""CaGPClassifier: its ELBO against the definition, its reduction to CaGP's family,
gradients, training against the Laplace approximation, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cagp_data import F64, gen

import pnsolve as pn
from pnsolve.testing import krylov_tol

pytestmark = pytest.mark.usefixtures("one_thread")


def _labels(n: int, seed: int = 0):
    g = gen(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64)
    f = torch.sin(6 * X[:, 0]) + X[:, 1]
    y = (torch.rand(n, generator=g, dtype=F64) < torch.sigmoid(3 * f)).to(F64)
    return X, y


def _model(i: int = 6, **kwargs) -> pn.gp.CaGPClassifier:
    return pn.gp.CaGPClassifier(pn.kernels.RBF(lengthscale=0.3, outputscale=2.0), i, **kwargs)


def _perturb(m: pn.gp.CaGPClassifier) -> None:
    """Move the variational parameters off their initial values (a generic point)."""
    g = gen(9)
    with torch.no_grad():
        m.pseudo_targets.add_(0.3 * torch.randn(m.num_actions, generator=g, dtype=F64))
        m.log_pseudo_noise.add_(0.2 * torch.randn(m.num_actions, generator=g, dtype=F64))


def test_the_elbo_equals_its_definition():
    """E_q log p(y | f) by a finer, independent quadrature, KL by torch.distributions."""
    X, y = _labels(35)
    m = _model()
    m.fit(X, y, steps=0, generator=gen(1))
    _perturb(m)
    S = m.pattern.dense(m.action_values)
    with torch.no_grad():
        K = m.kernel(X)
        G_hat = S.mT @ K @ S + torch.diag(torch.exp(m.log_pseudo_noise))
        mean = K @ S @ torch.linalg.solve(G_hat, m.pseudo_targets)
        Sigma = K - K @ S @ torch.linalg.solve(G_hat, S.mT @ K)
        Sigma = 0.5 * (Sigma + Sigma.mT)
        nodes, weights = np.polynomial.hermite_e.hermegauss(120)
        z = torch.as_tensor(nodes, dtype=F64)
        w = torch.as_tensor(weights / weights.sum(), dtype=F64)
        f = mean[:, None] + z * Sigma.diagonal().clamp_min(0).sqrt()[:, None]
        sign = (2 * y - 1)[:, None]
        ell = (torch.nn.functional.logsigmoid(sign * f) @ w).sum()
        q = torch.distributions.MultivariateNormal(mean, Sigma)
        p = torch.distributions.MultivariateNormal(torch.zeros(35, dtype=F64), K)
        expected = float(ell - torch.distributions.kl_divergence(q, p))
    tol = krylov_tol(F64, float(torch.linalg.cond(K)))
    assert abs(m.elbo(X, y) - expected) <= tol * abs(expected)


def test_with_cagp_s_pseudo_data_the_posterior_is_cagp_s():
    """u = Sᵀy and D = σ² SᵀS: the family contains CaGP's Gaussian posterior."""
    X, y = _labels(40)
    Xs, _ = _labels(10, seed=1)
    c = _model(5)
    c.fit(X, y, steps=0, generator=gen(1))
    r = pn.gp.CaGP(pn.kernels.RBF(lengthscale=0.3, outputscale=2.0), 0.2, 5, backend="dense")
    r.fit(X, y, steps=0, generator=gen(1))  # the same generator: the same blocks and entries
    assert torch.equal(r.action_values, c.action_values)
    with torch.no_grad():
        c.pseudo_targets.copy_(c.pattern.t_matmul(c.action_values, y[:, None])[:, 0])
        c.log_pseudo_noise.copy_(torch.log(0.2 * c.pattern.gram_diagonal(c.action_values)))
    a, b = c.posterior(Xs), r.posterior(Xs)
    torch.testing.assert_close(a.mean, b.mean)
    torch.testing.assert_close(a.var, b.var)


def test_gradients_match_finite_differences():
    X, y = _labels(30)
    m = _model(4)
    m.fit(X, y, steps=0, generator=gen(1))
    _perturb(m)

    def elbo(values, u, log_d):
        return m._classification_elbo(X, y, values, u, log_d)[0]

    leaves = tuple(t.clone().requires_grad_(True)
                   for t in (m.action_values, m.pseudo_targets, m.log_pseudo_noise))  # fmt: skip
    assert torch.autograd.gradcheck(elbo, leaves, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_training_matches_the_laplace_classifier_at_the_learned_hyperparameters():
    X, y = _labels(250)
    Xs, ys = _labels(400, seed=1)
    m = _model(25)
    m.fit(X, y, steps=0, generator=gen(1))
    start = m.elbo(X, y)
    m.fit(X, y, steps=120, lr=0.05, generator=gen(1))
    assert m.elbo(X, y) > start
    p = m.predict_proba(Xs).clamp(1e-12, 1 - 1e-12)
    nlp = float(-(ys * p.log() + (1 - ys) * (1 - p).log()).mean())
    k = pn.kernels.RBF(
        lengthscale=float(m.kernel.lengthscale.detach()),
        outputscale=float(m.kernel.outputscale.detach()),
    )
    laplace = pn.gp.IterNCGP(k, pn.likelihoods.Bernoulli(), pn.policies.CG(),
                             pn.stopping.ResidualNorm(rtol=1e-10)).fit(X, y)  # fmt: skip
    pl = laplace.predict_proba(Xs).clamp(1e-12, 1 - 1e-12)
    nlp_laplace = float(-(ys * pl.log() + (1 - ys) * (1 - pl).log()).mean())
    assert nlp <= nlp_laplace + 0.02, (nlp, nlp_laplace)
    assert not m.posterior(Xs).calibrated


def test_counts_train_too():
    g = gen(3)
    X = torch.rand(120, 1, generator=g, dtype=F64)
    y = torch.poisson(torch.exp(1.0 + torch.sin(5 * X[:, 0])), generator=g)
    m = pn.gp.CaGPClassifier(pn.kernels.RBF(lengthscale=0.3), 10,
                             likelihood=pn.likelihoods.Poisson())  # fmt: skip
    m.fit(X, y, steps=0, generator=gen(1))
    start = m.elbo(X, y)
    m.fit(X, y, steps=60, lr=0.05, generator=gen(1))
    assert m.elbo(X, y) > start
    assert bool((m.predict_proba(X) > 0).all())


def test_bad_input_is_refused_by_name():
    with pytest.raises(TypeError, match="likelihood must be"):
        pn.gp.CaGPClassifier(pn.kernels.RBF(), 3, likelihood=pn.likelihoods.Gaussian(0.1))
    X, y = _labels(20)
    m = _model(3)
    with pytest.raises(AttributeError, match="no noise variance"):
        m.noise  # noqa: B018
    with pytest.raises(ValueError, match="y"):
        m.fit(X, 2 * y + 1, steps=0, generator=gen(1))
