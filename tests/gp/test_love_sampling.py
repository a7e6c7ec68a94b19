"""LOVE's fast predictive samples (second Lanczos on the test covariance) and cache reuse."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.love_sampling import lanczos_root, predictive_covariance
from pnsolve.testing import exact_tol, krylov_tol, moment_threshold, moment_z_scores

F64 = torch.float64
FALSE_ALARM = 1e-3  # family-wise per statistical test (Bonferroni inside)


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _data(n=150, t=12, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(5 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    Xs = torch.rand(t, d, generator=g, dtype=F64)
    return X, y, Xs


def _gp(X, y, noise=0.05):
    return pn.gp.ExactGP(pn.kernels.RBF(lengthscale=0.3), noise=noise).fit(X, y)


def test_root_at_full_rank_reproduces_the_test_covariance():
    X, y, Xs = _data()
    gp = _gp(X, y)
    post = gp.posterior(Xs, method="love", rank=40)
    S = post.sample_root()
    C = post.cov()
    cond = float(torch.linalg.cond(C))
    tol = krylov_tol(F64, cond) * float(C.diagonal().max())
    torch.testing.assert_close(S @ S.mT, C, rtol=0, atol=tol)
    assert post.sample_root() is S  # computed once, kept


def test_root_rank_is_the_cache_rank_and_captures_the_top_of_the_spectrum():
    X, y, Xs = _data(t=60)
    gp = _gp(X, y)
    post = gp.posterior(Xs, method="love", rank=10)
    S = post.sample_root()
    assert S.shape == (60, 10)
    C = post.cov()
    # S Sᵀ = Q T Qᵀ is the Rayleigh–Ritz compression of C: trace ≤ trace C, and the
    # largest Ritz value matches the largest eigenvalue (Lanczos finds the extremes first).
    lam = torch.linalg.eigvalsh(C)
    ritz = torch.linalg.eigvalsh(S.mT @ S)
    assert float(ritz.sum()) <= float(lam.sum()) * (1 + exact_tol(F64, 60))
    torch.testing.assert_close(ritz[-1], lam[-1], rtol=krylov_tol(F64, 1.0) * 1e3, atol=0)


@pytest.mark.statistical
def test_samples_have_the_root_distribution():
    # s draws mean + S z: the sample mean and covariance must match (mean, S Sᵀ).
    X, y, Xs = _data(t=6)
    gp = _gp(X, y)
    post = gp.posterior(Xs, method="love", rank=30)
    F = post.sample(4000, generator=torch.Generator().manual_seed(3))
    assert F.shape == (6, 4000) and F.dtype == F64
    S = post.sample_root()
    cov = S @ S.mT
    t = Xs.shape[0]
    z = moment_threshold(t, FALSE_ALARM)
    zm, zc = moment_z_scores(F, post.mean, cov)
    assert zm <= z and zc <= z, (zm, zc, z)
    # power: a sampler that forgets the cache (prior covariance) is rejected
    wrong = post.mean[:, None] + torch.linalg.cholesky(gp.kernel(Xs)) @ torch.randn(
        t, 4000, generator=torch.Generator().manual_seed(4), dtype=F64
    )
    assert max(moment_z_scores(wrong, post.mean, cov)) > z


def test_samples_reproducible_with_generator():
    X, y, Xs = _data()
    post = _gp(X, y).posterior(Xs, method="love", rank=20)
    a = post.sample(5, generator=torch.Generator().manual_seed(1))
    b = post.sample(5, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_itergp_love_samples():
    X, y, Xs = _data(n=80, t=8)
    gp = pn.gp.IterGP(
        pn.kernels.RBF(lengthscale=0.3), 0.05, pn.policies.CG(), pn.stopping.MaxIterations(5)
    ).fit(X, y)
    post = gp.posterior(Xs, method="love", rank=30)
    S = post.sample_root()
    C = post.cov()
    tol = krylov_tol(F64, float(torch.linalg.cond(C))) * float(C.diagonal().max())
    torch.testing.assert_close(S @ S.mT, C, rtol=0, atol=tol)


def test_indefinite_test_covariance_raises():
    _, _, Xs = _data(t=10)
    k = pn.kernels.RBF(lengthscale=0.3)
    P = 2.0 * torch.linalg.cholesky(k(Xs) + 1e-8 * torch.eye(10, dtype=F64))  # P Pᵀ = 4 k
    C = predictive_covariance(pn.linops.as_linop(k(Xs)), P)
    with pytest.raises(pn.NotPositiveDefiniteError, match="negative Ritz value"):
        lanczos_root(C, 5, torch.ones(10, dtype=F64))
    with pytest.raises(ValueError, match="P must have shape"):
        predictive_covariance(pn.linops.as_linop(k(Xs)), P[:5])


# --------------------------------------------------------------------------- cache reuse
@pytest.mark.parametrize("model", ["exact", "iter"])
def test_cache_reused_across_calls(model):
    X, y, Xs = _data(n=100, t=20)
    if model == "exact":
        gp = _gp(X, y)
    else:
        gp = pn.gp.IterGP(
            pn.kernels.RBF(lengthscale=0.3), 0.05, pn.policies.CG(), pn.stopping.MaxIterations(8)
        ).fit(X, y)
    cache = gp.build_love_cache(rank=15, Xs=Xs)
    assert cache.rank == 15 and not hasattr(gp, "love_cache")
    ref = gp.posterior(Xs, method="love", rank=15)  # builds its own cache (same probe)
    assert ref.love_cache is not cache and ref.love_cache.rank == 15
    torch.testing.assert_close(ref.love_cache.R, cache.R, rtol=0, atol=0)
    other = gp.posterior(Xs[:7], method="love", cache=cache)
    assert other.love_cache is cache
    torch.testing.assert_close(other.var, ref.var[:7])
    torch.testing.assert_close(other.mean, ref.mean[:7])
    # a posterior's cache is reusable like a built one
    again = gp.posterior(Xs[7:], method="love", cache=ref.love_cache)
    torch.testing.assert_close(again.var, ref.var[7:])
    # default probe without Xs: the centred targets
    c2 = gp.build_love_cache(rank=4)
    torch.testing.assert_close(c2.Q[:, 0], y / y.norm())  # prior mean 0: y − μ = y


def test_cache_from_another_model_is_refused():
    X, y, Xs = _data(n=60)
    a, b = _gp(X, y), _gp(X, y, noise=0.1)
    cache = a.build_love_cache(rank=5, Xs=Xs)
    with pytest.raises(ValueError, match="different K̂"):
        b.posterior(Xs, method="love", cache=cache)
    with pytest.raises(TypeError, match="LoveCache"):
        b.posterior(Xs, method="love", cache="cache")
    with pytest.raises(RuntimeError, match="fit"):
        pn.gp.ExactGP(pn.kernels.RBF(), 0.1).build_love_cache(5)
