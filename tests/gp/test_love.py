"""LOVE: Lanczos variance cache against Cholesky, and as a solver belief.

SMAE (standardised mean absolute error) here is
``mean |var_love − var_exact| / mean var_exact`` over the test points.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.gp import GaussianPosterior, LoveCache, LovePosterior
from pnsolve.gp.belief_posterior import belief_posterior
from pnsolve.gp.fit_state import FitChangedError
from pnsolve.testing import exact_tol, iterative_tol, krylov_tol, rtol_for

F64 = torch.float64
SMAE_TARGET = 1e-4  # the paper's / DESIGN §7 accuracy claim for low-dimensional data


@pytest.fixture(autouse=True)
def _no_grad():
    """Kernel hyperparameters require grad; these tests check values only."""
    with torch.no_grad():
        yield


def _data(n=120, t=30, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(5 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    Xs = torch.rand(t, d, generator=g, dtype=F64)
    return X, y, Xs


def _kernel():
    return pn.kernels.RBF(lengthscale=0.3)


def _smae(var, ref):
    return float((var - ref).abs().mean() / ref.mean())


def _khat(kernel, X, noise):
    return kernel(X) + noise * torch.eye(X.shape[0], dtype=X.dtype)


# ----------------------------------------------------------------- ExactGP
def test_love_variance_at_least_exact_and_monotone_in_rank():
    X, y, Xs = _data()
    gp = pn.gp.ExactGP(_kernel(), noise=0.05).fit(X, y)
    exact = gp.posterior(Xs).var
    tol = exact_tol(F64, X.shape[0]) * float(gp.kernel.diag(Xs).max())
    prev = None
    for k in (2, 5, 10, 20, 40):
        post = gp.posterior(Xs, method="love", rank=k)
        assert torch.all(post.var >= exact - tol)
        torch.testing.assert_close(post.math_var, exact)
        assert torch.all(post.comp_var >= -tol)
        if prev is not None:  # nested Krylov spaces: pointwise non-increasing
            assert torch.all(post.var <= prev + tol)
        prev = post.var
        torch.testing.assert_close(post.mean, gp.posterior(Xs).mean)


def test_love_full_rank_is_exact():
    X, y, Xs = _data(n=60)
    gp = pn.gp.ExactGP(_kernel(), noise=0.1).fit(X, y)
    exact = gp.posterior(Xs)
    post = gp.posterior(Xs, method="love", rank=X.shape[0])
    cond = float(torch.linalg.cond(_khat(gp.kernel, X, gp.noise)))
    scale = float(gp.kernel.diag(Xs).max())
    torch.testing.assert_close(post.var, exact.var, rtol=0, atol=krylov_tol(F64, cond) * scale)
    torch.testing.assert_close(post.cov(), exact.cov(), rtol=0, atol=krylov_tol(F64, cond) * scale)


def test_love_smae_low_dimensional():
    X, y, Xs = _data(n=800, t=200, d=2, seed=1)
    gp = pn.gp.ExactGP(_kernel(), noise=0.01).fit(X, y)
    exact = gp.posterior(Xs).var
    smae = _smae(gp.posterior(Xs, method="love", rank=100).var, exact)
    assert smae <= SMAE_TARGET


def test_love_user_probe_and_cache_on_the_posterior():
    X, y, Xs = _data()
    gp = pn.gp.ExactGP(_kernel(), noise=0.05).fit(X, y)
    probe = y - y.mean()
    post = gp.posterior(Xs, method="love", rank=7, probe=probe)
    cache = post.love_cache  # built for this call, handed back, not kept on the model
    assert isinstance(cache, LoveCache) and cache.rank == 7
    assert not hasattr(gp, "love_cache")
    torch.testing.assert_close(cache.Q[:, 0], probe / probe.norm())
    assert isinstance(post, LovePosterior)
    exact = gp.posterior(Xs)  # the general posterior knows nothing of LOVE
    assert type(exact) is GaussianPosterior and not hasattr(exact, "love_cache")


def _attributes(model):
    """The model's attributes by identity (a write replaces or adds an entry)."""
    return {key: id(value) for key, value in vars(model).items()}


@pytest.mark.parametrize("model", ["exact", "iter"])
def test_posterior_is_a_pure_query(model):
    X, y, Xs = _data(n=80, t=10)
    if model == "exact":
        gp = pn.gp.ExactGP(_kernel(), noise=0.05).fit(X, y)
        methods = ("exact", "love")
    else:
        gp = pn.gp.IterGP(_kernel(), 0.05, pn.policies.CG(), pn.stopping.MaxIterations(6)).fit(X, y)
        methods = ("belief", "love")
    before = _attributes(gp)
    for method in methods:
        post = gp.posterior(Xs, method=method, rank=9)
        post.math_var, post.cov(), post.sample(2, generator=torch.Generator().manual_seed(0))
    cache = gp.build_love_cache(rank=5, Xs=Xs)
    again = gp.posterior(Xs, method="love", cache=cache)
    assert again.love_cache is cache
    assert _attributes(gp) == before


def test_love_posterior_is_the_belief_posterior_of_its_cache():
    # LOVE's mean and variances are the belief posterior of C_k = R Rᵀ: the same function
    # (belief_posterior) with the cache belief's root V = R gives the same numbers.
    X, y, Xs = _data(n=90, t=12)
    gp = pn.gp.IterGP(
        _kernel(), 0.05, pn.policies.CG(), pn.stopping.MaxIterations(7), backend="dense"
    ).fit(X, y)
    cache = gp.build_love_cache(rank=11, Xs=Xs)
    love = gp.posterior(Xs, method="love", cache=cache)
    ref = belief_posterior(
        cross=gp.kernel.linop(Xs, X, backend="dense"),
        prior_var=gp.kernel.diag(Xs),
        prior_cov=lambda: gp.kernel(Xs),
        weights=gp.belief.mean,
        offset=gp.mean,
        A=gp.A,
        V=cache.belief().V,
    )
    assert torch.equal(love.mean, ref.mean) and torch.equal(love.var, ref.var)
    torch.testing.assert_close(love.cov(), ref.cov(), rtol=0, atol=exact_tol(F64, 90))
    assert type(ref) is GaussianPosterior and not hasattr(ref, "sample_root")
    assert isinstance(love, LovePosterior) and love.sample_root() is not None


def test_love_posterior_is_a_gaussian_posterior_apart():
    # The split: GaussianPosterior (pnsolve.gp.posterior) does not know LOVE; the LOVE
    # parts (love_cache, the low-rank sampling root) live in the LovePosterior subclass.
    import pnsolve.gp.posterior as general

    assert not [name for name in vars(general) if "love" in name.lower()]  # no LOVE import
    assert issubclass(LovePosterior, GaussianPosterior)
    assert not hasattr(GaussianPosterior, "sample_root")
    assert not hasattr(GaussianPosterior(torch.zeros(2), torch.ones(2), torch.eye), "love_cache")
    X, y, Xs = _data(n=60, t=9)
    gp = pn.gp.ExactGP(_kernel(), noise=0.05).fit(X, y)
    post = gp.posterior(Xs, method="love", rank=12)
    assert repr(post).startswith("LovePosterior(t=9,")
    g = torch.Generator().manual_seed(3)
    draws = post.sample(4, generator=g)
    S = post.sample_root()
    g.manual_seed(3)
    z = torch.randn(S.shape[1], 4, generator=g, dtype=F64)
    torch.testing.assert_close(draws, post.mean.unsqueeze(-1) + S @ z, rtol=0, atol=0)


@pytest.mark.parametrize("model", ["exact", "iter"])
def test_love_posteriors_are_tied_to_their_fit(model):
    # tie_to (from GaussianPosterior) guards the LOVE parts too: a late sampling root or
    # math_var after a hyperparameter change is refused, what was computed stays.
    X, y, Xs = _data(n=60, t=8)
    k = _kernel()
    if model == "exact":
        gp = pn.gp.ExactGP(k, noise=0.05).fit(X, y)
    else:
        gp = pn.gp.IterGP(k, 0.05, pn.policies.CG(), pn.stopping.MaxIterations(6)).fit(X, y)
    early, late = (gp.posterior(Xs, method="love", rank=6) for _ in range(2))
    S = early.sample_root()
    k.lengthscale = 0.2
    assert early.sample_root() is S
    with pytest.raises(FitChangedError):
        late.sample_root()
    with pytest.raises(FitChangedError):
        late.sample(2, generator=torch.Generator().manual_seed(0))
    with pytest.raises(FitChangedError):
        late.math_var  # noqa: B018
    assert isinstance(gp.posterior(Xs, method="love", rank=6), LovePosterior)  # refitted


# ----------------------------------------------------------------- the cache
def test_cache_root_and_AR_formula():
    X, _, Xs = _data(n=100)
    A = _khat(_kernel(), X, 0.05)
    probe = _kernel()(X, Xs).mean(1)
    for k in (1, 6, 25):
        cache = LoveCache.build(A, probe, k)
        R = cache.R
        tol = exact_tol(F64, X.shape[0])
        Tinv = torch.linalg.inv(cache.T)
        torch.testing.assert_close(R @ R.mT, cache.Q @ Tinv @ cache.Q.mT, rtol=0, atol=tol)
        torch.testing.assert_close(R.mT @ A @ R, torch.eye(k, dtype=F64), rtol=0, atol=tol)
        scale = float(torch.linalg.matrix_norm(A, 2)) * float(R.abs().max())
        torch.testing.assert_close(cache.AR, A @ R, rtol=0, atol=tol * scale)


def test_cache_is_the_cg_belief():
    X, _, Xs = _data(n=80)
    A = _khat(_kernel(), X, 0.1)
    probe = _kernel()(X, Xs).mean(1)
    k = 8
    cache = LoveCache.build(A, probe, k)
    pls = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(k))
    ref, _ = pls.solve(A, probe)
    assert ref.rank == k
    mine = cache.belief()
    cond = float(torch.linalg.cond(A))
    scale = float(torch.linalg.matrix_norm(torch.linalg.inv(A), 2))
    tol = krylov_tol(F64, cond) * scale
    torch.testing.assert_close(
        mine.inverse_approx.to_dense(), ref.inverse_approx.to_dense(), rtol=0, atol=tol
    )
    torch.testing.assert_close(mine.mean, ref.mean, rtol=0, atol=tol * float(probe.norm()))
    torch.testing.assert_close(mine.W, A @ mine.V, rtol=0, atol=exact_tol(F64, 80) * cond)
    # a new right-hand side reuses the cache: mean = C_k b
    b = torch.ones(80, dtype=F64)
    torch.testing.assert_close(cache.belief(b).mean, cache.R @ (cache.R.mT @ b))


def test_cache_is_a_krylov_buffer():
    # DESIGN §4: the cache's Lanczos vectors are buffered actions with images K̂ Q from the
    # Lanczos relation; the virtual run on them is the cache's belief C_k = R Rᵀ.
    X, _, Xs = _data(n=80)
    A = pn.linops.as_linop(_khat(_kernel(), X, 0.1))
    cache = LoveCache.build(A, _kernel()(X, Xs).mean(1), 9)
    buf = cache.buffer()
    assert isinstance(buf, pn.krylov.KrylovBuffer) and buf.size == 9 and buf.K is A
    cond = float(torch.linalg.cond(A.to_dense()))
    torch.testing.assert_close(
        buf.images, A.to_dense() @ cache.Q, rtol=0, atol=exact_tol(F64, 80) * cond
    )
    b = torch.linspace(-1, 1, 80, dtype=F64)
    belief = pn.solvers.virtual_run(buf, A, b)
    scale = float(torch.linalg.matrix_norm(torch.linalg.inv(A.to_dense()), 2))
    torch.testing.assert_close(
        belief.inverse_approx.to_dense(),
        cache.inverse_approx.to_dense(),
        rtol=0,
        atol=krylov_tol(F64, cond) * scale,
    )
    assert cache.buffer() is not buf  # a new buffer per call: the cache stays immutable


def test_heteroscedastic_variances_stay_above_exact():
    X, _, Xs = _data(n=150, t=40, seed=3)
    k = _kernel()
    g = torch.Generator().manual_seed(4)
    noise = 10.0 ** (-4 + 4 * torch.rand(X.shape[0], generator=g, dtype=F64))  # 1e-4 … 1
    A = k(X) + torch.diag(noise)
    cross = k(X, Xs)
    prior = k.diag(Xs)
    exact = prior - (cross * torch.linalg.solve(A, cross)).sum(0)
    tol = exact_tol(F64, X.shape[0]) * float(torch.linalg.cond(A)) * float(prior.max())
    for rank in (5, 20, 60, 150):
        cache = LoveCache.build(pn.linops.as_linop(A), cross.mean(1), rank)
        var = cache.variance(cross.mT, prior)
        assert torch.all(var >= exact - tol)


def test_negative_variance_raises():
    X, _, Xs = _data(n=50)
    k = _kernel()
    cache = LoveCache.build(_khat(k, X, 0.01), k(X, Xs).mean(1), 30)
    cross = k(X, Xs)
    with pytest.raises(ValueError, match="negative variance"):
        cache.variance(cross.mT, torch.zeros(Xs.shape[0], dtype=F64))  # inconsistent prior


def test_bad_input():
    X, y, Xs = _data(n=30)
    A = _khat(_kernel(), X, 0.1)
    with pytest.raises(ValueError, match="rank"):
        LoveCache.build(A, torch.ones(30, dtype=F64), 0)
    with pytest.raises(TypeError, match="rank"):
        LoveCache.build(A, torch.ones(30, dtype=F64), 2.0)
    with pytest.raises(ValueError, match="probe"):
        LoveCache.build(A, torch.ones(29, dtype=F64), 3)
    with pytest.raises(ValueError, match="probe"):
        LoveCache.build(A, torch.ones(30, 2, dtype=F64), 3)
    with pytest.raises(ValueError, match="nonzero"):
        LoveCache.build(A, torch.zeros(30, dtype=F64), 3)
    with pytest.raises(ValueError, match="positive definite"):
        LoveCache.build(-A, torch.ones(30, dtype=F64), 3)
    gp = pn.gp.ExactGP(_kernel(), noise=0.1).fit(X, y)
    with pytest.raises(ValueError, match="rank"):
        gp.posterior(Xs, method="love", rank=0)
    with pytest.raises(ValueError, match="probe"):
        gp.posterior(Xs, method="love", probe=torch.ones(5, dtype=F64))
    with pytest.raises(ValueError, match="method"):
        gp.posterior(Xs, method="lanczos")


# ----------------------------------------------------------------- IterGP
def test_itergp_love():
    X, y, Xs = _data(n=100)
    exact = pn.gp.ExactGP(_kernel(), noise=0.05).fit(X, y).posterior(Xs)
    gp = pn.gp.IterGP(
        _kernel(), 0.05, pn.policies.CG(), pn.stopping.MaxIterations(10), backend="dense"
    ).fit(X, y)
    ref = gp.posterior(Xs)
    post = gp.posterior(Xs, method="love", rank=40)
    torch.testing.assert_close(post.mean, ref.mean)  # mean from the belief
    tol = iterative_tol(F64) * float(gp.kernel.diag(Xs).max())
    torch.testing.assert_close(post.math_var, exact.var, rtol=rtol_for(F64), atol=tol)
    assert torch.all(post.comp_var >= -tol)
    assert torch.all(post.var >= exact.var - tol)
    full = gp.posterior(Xs, method="love", rank=X.shape[0])
    torch.testing.assert_close(full.var, exact.var, rtol=0, atol=tol)
    with pytest.raises(ValueError, match="method"):
        gp.posterior(Xs, method="exact")
