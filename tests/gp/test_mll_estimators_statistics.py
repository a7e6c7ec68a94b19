"""Marginal-likelihood gradient estimators: statistical tests (fixed seeds, stated level).

* the standard and pathwise estimators are unbiased for the exact gradient;
* the pathwise probes ``ẑ = K̂⁻¹ ξ`` have second moment ``K̂⁻¹``;
* pathwise posterior samples have the (RFF-conditioned) GP posterior's moments.

All solves are exact (Cholesky), so only the estimators' own randomness is tested.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import pnsolve as pn
from pnsolve.gp.mll_estimators import PathwiseEstimator, StandardEstimator
from pnsolve.kernels.base import inv_softplus
from pnsolve.testing import krylov_tol, moment_threshold, moment_z_scores, statistical_threshold

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
FALSE_ALARM = 1e-3  # family-wise per test (Bonferroni over the z-scores inside a test)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _problem(n=40, d=2, seed=0):
    g = _gen(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(4 * X.sum(-1)) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y - y.mean()


def _model(noise=0.1):
    kernel = pn.kernels.Matern(
        1.5,
        lengthscale=torch.tensor([0.3, 0.5], dtype=F64),
        outputscale=torch.tensor(1.2, dtype=F64),
    )
    raw_noise = nn.Parameter(inv_softplus(torch.tensor(noise, dtype=F64)))
    return kernel, raw_noise


def _leaves(kernel, raw_noise):
    return [kernel.raw_lengthscale, kernel.raw_outputscale, raw_noise]


def _exact_grad(kernel, raw_noise, X, y, noise_factor=1.0):
    noise = noise_factor * nn.functional.softplus(raw_noise)
    gp = pn.gp.ExactGP(kernel, noise=float(noise.detach()))
    loss = -gp.log_marginal_likelihood(X, y, noise=noise)
    grads = torch.autograd.grad(loss, _leaves(kernel, raw_noise))
    return torch.cat([g.reshape(-1) for g in grads])


def _cholesky(kernel, X, noise):
    with torch.no_grad():
        Khat = kernel(X) + float(noise) * torch.eye(X.shape[0], dtype=X.dtype)
        return Khat, torch.linalg.cholesky(Khat)


# ----------------------------------------------------------------------- unbiasedness
@pytest.mark.statistical
@pytest.mark.parametrize(
    "make",
    [
        lambda g: StandardEstimator(16, "gaussian", generator=g),
        lambda g: StandardEstimator(16, "rademacher", generator=g),
        # The pathwise estimator is unbiased only *marginally* over the random Fourier
        # frequencies: E_ω[Φ Φᵀ] = K, so E[ξ ξᵀ] = K̂ only when ω is redrawn. resample()
        # redraws the frequencies (and phases, weights, noise draws) for every estimate, so
        # the mean over draws targets the exact gradient even with few features.
        lambda g: PathwiseEstimator(16, 64, generator=g),
    ],
    ids=["standard-gaussian", "standard-rademacher", "pathwise"],
)
def test_estimators_are_unbiased(make):
    X, y = _problem()
    kernel, raw_noise = _model()
    leaves = _leaves(kernel, raw_noise)
    exact = _exact_grad(kernel, raw_noise, X, y)
    noise = nn.functional.softplus(raw_noise)
    _, L = _cholesky(kernel, X, noise)
    est = make(_gen(11))
    # 1000 independent estimates of 16 probes each: the mean of each parameter's estimates
    # is a z-score against the exact gradient (CLT; the sample standard error of 1000
    # draws is accurate to a few per cent).
    draws = 1000
    G = torch.empty(draws, exact.numel(), dtype=F64)
    for i in range(draws):
        est.resample()
        V = torch.cholesky_solve(est.targets(kernel, X, noise, y), L)
        est.backward(kernel, X, noise, y, V)
        G[i] = torch.cat([p.grad.reshape(-1) for p in leaves])
        for p in leaves:
            p.grad = None
    se = G.std(0) / draws**0.5
    z = ((G.mean(0) - exact) / se).abs()
    threshold = statistical_threshold(FALSE_ALARM / exact.numel())
    assert bool((z <= threshold).all()), (z, threshold)
    # power: the exact gradient at a 20 % larger noise is rejected by the same test
    shifted = _exact_grad(kernel, raw_noise, X, y, noise_factor=1.2)
    assert float(((G.mean(0) - shifted) / se).abs().max()) > threshold


# ------------------------------------------------------------- pathwise probe moments
@pytest.mark.statistical
def test_pathwise_probes_have_covariance_khat_inverse():
    # ẑ = K̂⁻¹ ξ with ξ = Φ w_f + σ w: E[ẑ ẑᵀ] = K̂⁻¹ (marginally over the frequencies,
    # so every sample gets fresh frequencies, weights and noise draws via resample()).
    # Quadratic forms q_kl = (a_kᵀ ẑ)(a_lᵀ ẑ) along the top and bottom eigenvectors of K̂
    # and a random direction have means a_kᵀ K̂⁻¹ a_l; each sample averages the s probes
    # of one draw (i.i.d. across draws). z-test with the sample standard error, Bonferroni
    # over the 6 pairs. Few features (m = 16) on purpose: the identity holds for any m.
    X, y = _problem(n=30)
    kernel, _ = _model()
    noise = 0.05
    Khat, L = _cholesky(kernel, X, noise)
    _, evecs = torch.linalg.eigh(Khat)
    a = torch.randn(30, generator=_gen(3), dtype=F64)
    A = torch.stack([evecs[:, -1], evecs[:, 0], a / a.norm()], dim=1)  # (n, 3)
    target = A.mT @ torch.cholesky_solve(A, L)
    iu = torch.triu_indices(3, 3)
    est = PathwiseEstimator(16, 16, generator=_gen(21))
    draws = 1500
    Q = torch.empty(draws, iu.shape[1], dtype=F64)
    Q_no_noise = torch.empty_like(Q)
    for i in range(draws):
        est.resample()
        xi = est.targets(kernel, X, noise, y)[:, 1:]
        for out, rhs in ((Q, xi), (Q_no_noise, xi - noise**0.5 * est.draws.noise_weights)):
            P = A.mT @ torch.cholesky_solve(rhs, L)  # (3, s) projections of ẑ
            out[i] = (P @ P.mT / P.shape[1])[iu[0], iu[1]]
    threshold = statistical_threshold(FALSE_ALARM / iu.shape[1])
    expected = target[iu[0], iu[1]]
    z = ((Q.mean(0) - expected) / (Q.std(0) / draws**0.5)).abs()
    assert bool((z <= threshold).all()), (z, threshold)
    # power: probes that forget the noise draw (E = K̂⁻¹ K K̂⁻¹) are rejected
    z_bad = (Q_no_noise.mean(0) - expected) / (Q_no_noise.std(0) / draws**0.5)
    assert float(z_bad.abs().max()) > threshold


# ------------------------------------------------------------------ posterior samples
def _rff_conditioned_moments(est, kernel, X, noise, y, Xs):
    """Law of ``f(Xs) + K_*X K̂⁻¹ (y − f(X) − ε)`` for ``f = φᵀ w_f`` (frozen frequencies).

    Gaussian with mean ``A y`` (``A = K_*X K̂⁻¹``, the exact GP posterior mean) and
    covariance ``(Φ_* − A Φ_X)(Φ_* − A Φ_X)ᵀ + σ² A Aᵀ``: the exact GP posterior
    covariance with the prior term ``K`` replaced by the RFF kernel ``Φ Φᵀ`` (so the test
    is exact for any number of features; the RFF error is accounted for, not ignored).
    """
    with torch.no_grad():
        Khat, _ = _cholesky(kernel, X, noise)
        A = torch.linalg.solve(Khat, kernel(X, Xs)).mT
        D = est.features(kernel, Xs) - A @ est.features(kernel, X)
        return A @ y, D @ D.mT + noise * A @ A.mT


@pytest.mark.statistical
def test_posterior_samples_match_posterior_moments():
    X, y = _problem(n=20)
    Xs = 1.4 * torch.rand(4, 2, generator=_gen(4), dtype=F64) - 0.2
    kernel, _ = _model()
    noise, s = 0.05, 4000
    est = PathwiseEstimator(s, 256, generator=_gen(31))
    _, L = _cholesky(kernel, X, noise)
    V = torch.cholesky_solve(est.targets(kernel, X, noise, y), L)
    with torch.no_grad():
        F = est.posterior_samples(kernel, X, noise, y, V, Xs)
    mean, cov = _rff_conditioned_moments(est, kernel, X, noise, y, Xs)
    # the sampling mean is the exact GP's posterior mean
    post = pn.gp.ExactGP(kernel, noise=noise).fit(X, y).posterior(Xs)
    cond = float(torch.linalg.cond(_cholesky(kernel, X, noise)[0]))
    torch.testing.assert_close(mean, post.mean, rtol=0.0, atol=krylov_tol(F64, cond))
    t = Xs.shape[0]
    threshold = moment_threshold(t, FALSE_ALARM)
    zm, zc = moment_z_scores(F, mean, cov)
    assert zm <= threshold, (zm, threshold)
    assert zc <= threshold, (zc, threshold)
    # power: samples whose probes forget the noise draw (ξ = f(X) only) are rejected
    with torch.no_grad():
        eps = noise**0.5 * est.draws.noise_weights
        wrong = F + kernel(Xs, X) @ torch.cholesky_solve(eps, L)
    assert max(moment_z_scores(wrong, mean, cov)) > threshold
    # link to the exact GP: the RFF covariance error is O(outputscale/√m) (Monte Carlo over
    # m frequencies); the bound 8·outputscale/√m is a wide margin (measured 0.05–0.13,
    # i.e. 0.7–1.7 outputscale/√m, over 4 seeds).
    err = float((cov - post.cov()).abs().max())
    assert err <= 8 * float(kernel.outputscale.detach()) / 256**0.5, err
