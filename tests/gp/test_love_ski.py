"""LOVE with SKI kernels: the cache in grid space, constant-time variances, grid samples."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.gp.exact import SKI_DENSE_LIMIT
from pnsolve.gp.mll_estimators import StandardEstimator
from pnsolve.testing import exact_tol, krylov_tol, moment_threshold, moment_z_scores

pytestmark = pytest.mark.usefixtures("one_thread")
F64 = torch.float64
FALSE_ALARM = 1e-3  # family-wise per statistical test (Bonferroni inside)
BOUNDS = [(0.0, 1.0), (0.0, 1.0)]


def _data(n=300, t=25, seed=0, d=2):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(6 * X[:, 0]) * torch.cos(3 * X[:, -1]) + 0.1 * torch.randn(
        n, generator=g, dtype=F64
    )
    Xs = torch.rand(t, d, generator=g, dtype=F64)
    return X, y, Xs


def _ski(base=None, m=24, bounds=BOUNDS):
    base = pn.kernels.RBF(lengthscale=torch.tensor([0.2, 0.3])) if base is None else base
    return pn.kernels.GridInterpolation(base, m, grid_bounds=bounds)


def _itergp(k, X, y, noise=0.01, iters=None):
    stop = pn.stopping.MaxIterations(iters or X.shape[0])
    return pn.gp.IterGP(k, noise, pn.policies.CG(), stop).fit(X, y)


def test_itergp_on_ski_equals_the_exact_ski_gp():
    """CG on W K_UU Wᵀ + σ²I run to convergence: the exact SKI GP's mean; variances above.

    (The CG belief spans the Krylov space of ``y`` only, so its combined variance stays
    above the exact one: IterGP's computational uncertainty, not an SKI error.)
    """
    X, y, Xs = _data()
    k = _ski()
    exact = pn.gp.ExactGP(k, 0.01).fit(X, y).posterior(Xs)
    it = _itergp(k, X, y).posterior(Xs)
    cond = float(torch.linalg.cond(k(X).detach() + 0.01 * torch.eye(300, dtype=F64)))
    torch.testing.assert_close(it.mean, exact.mean, rtol=0, atol=krylov_tol(F64, cond) * 10)
    assert bool((it.var >= exact.var - krylov_tol(F64, cond)).all())


@pytest.mark.parametrize("model", ["exact", "iter"])
def test_grid_path_equals_the_n_space_path(model):
    """rootᵀ w(x) = Rᵀ k(X, x): the grid-space posterior = LOVE on the same cache in n-space."""
    X, y, Xs = _data()
    k = _ski()
    gp = pn.gp.ExactGP(k, 0.01).fit(X, y) if model == "exact" else _itergp(k, X, y, iters=40)
    cache = gp.build_love_cache(rank=30)
    assert cache.grid is not None and cache.grid.root.shape == (24 * 24, 30)
    fast = gp.posterior(Xs, method="love", cache=cache)
    slow = gp.posterior(Xs, method="love", cache=dataclasses.replace(cache, grid=None))
    tol = exact_tol(F64, 300) * 100
    torch.testing.assert_close(fast.mean, slow.mean, rtol=0, atol=tol)
    torch.testing.assert_close(fast.var, slow.var, rtol=0, atol=tol)
    torch.testing.assert_close(fast.cov(), slow.cov(), rtol=0, atol=tol)
    assert fast.love_cache is cache


@settings(max_examples=12, deadline=None)
@given(
    ls=st.floats(0.05, 0.6),
    noise=st.floats(1e-4, 0.5),
    rank=st.integers(1, 40),
    seed=st.integers(0, 2**16),
    matern=st.booleans(),
)
def test_love_ski_variances_bound_the_exact_ski_variances(ls, noise, rank, seed, matern):
    """R Rᵀ ≼ K̂⁻¹ ⇒ LOVE-SKI variances ≥ exact SKI variances, for any rank, kernel, noise."""
    X, y, Xs = _data(n=120, t=15, seed=seed)
    base = pn.kernels.Matern(nu=1.5, lengthscale=ls) if matern else pn.kernels.RBF(lengthscale=ls)
    k = _ski(base, m=16)
    gp = pn.gp.ExactGP(k, noise).fit(X, y)
    exact = gp.posterior(Xs).var
    love = gp.posterior(Xs, method="love", rank=rank).var
    slack = exact_tol(F64, 120) * 100 * float(k.diag(Xs).detach().max())
    assert bool((love >= exact - slack).all()), float((love - exact).min())


def test_love_ski_converges_to_exact_with_rank():
    """SMAE of LOVE-SKI vs exact SKI falls with the rank and is ≤ 1e-3 at rank 50 (2-d)."""
    X, y, Xs = _data(n=800, t=200, seed=3)
    gp = pn.gp.ExactGP(_ski(m=40), 0.01).fit(X, y)
    exact = gp.posterior(Xs).var
    smae = []
    for rank in (5, 20, 50):
        var = gp.posterior(Xs, method="love", cache=gp.build_love_cache(rank=rank)).var
        smae.append(float((var - exact).abs().mean() / y.var()))
    assert smae[0] > smae[1] > smae[2] and smae[2] <= 1e-3, smae


def test_default_ski_probe_is_the_papers_average_column():
    """Without Xs the SKI probe is b = W_X K_UU 1 / m (Pleiss et al. §3.2): calibrated."""
    X, y, _ = _data(n=100)
    k = _ski(m=12)
    gp = pn.gp.ExactGP(k, 0.05).fit(X, y)
    cache = gp.build_love_cache(rank=5)
    K = k.linop(X)
    b = K.left @ (K.grid_matrix @ torch.full((144,), 1 / 144, dtype=F64))
    torch.testing.assert_close(cache.Q[:, 0], b / b.norm())
    assert cache.calibrated
    assert gp.posterior(X[:3], method="love", cache=cache).calibrated


def test_grid_sampling_root_reproduces_the_grid_covariance_at_full_rank():
    """S Sᵀ = K_UU − root rootᵀ when the Lanczos rank reaches the grid size."""
    X, y, _ = _data(n=60)
    k = _ski(m=6)  # 36 grid points
    gp = pn.gp.ExactGP(k, 0.05).fit(X, y)
    cache = gp.build_love_cache(rank=36)
    G = cache.grid
    C = G.grid_matrix.to_dense() - G.root @ G.root.mT
    S = G.sampling_root
    assert G.sampling_root is S  # computed once
    tol = krylov_tol(F64, 1e4) * float(C.diagonal().max())
    torch.testing.assert_close(S @ S.mT, C, rtol=0, atol=tol)


@pytest.mark.statistical
def test_grid_samples_have_the_root_distribution():
    """s draws mean + W_s S z: sample mean and covariance match (mean, W_s S Sᵀ W_sᵀ)."""
    X, y, Xs = _data(t=6)
    gp = pn.gp.ExactGP(_ski(), 0.01).fit(X, y)
    post = gp.posterior(Xs, method="love", rank=40)
    F = post.sample(4000, generator=torch.Generator().manual_seed(3))
    assert F.shape == (6, 4000) and F.dtype == F64
    S = post.sample_root()
    cov = S @ S.mT
    t = Xs.shape[0]
    z = moment_threshold(t, FALSE_ALARM)
    zm, zc = moment_z_scores(F, post.mean, cov)
    assert zm <= z and zc <= z, (zm, zc, z)
    # the root is a rank-40 Lanczos root of LOVE's test covariance (t = 6: exact)
    tol = krylov_tol(F64, 1e6) * float(post.var.max())
    torch.testing.assert_close(cov, post.cov(), rtol=0, atol=tol)
    # power: samples from the prior covariance are rejected
    prior = gp.kernel(Xs).detach() + 1e-10 * torch.eye(t, dtype=F64)
    wrong = post.mean[:, None] + torch.linalg.cholesky(prior) @ torch.randn(
        t, 4000, generator=torch.Generator().manual_seed(4), dtype=F64
    )
    assert max(moment_z_scores(wrong, post.mean, cov)) > z


@pytest.mark.statistical
def test_amortised_grid_samples_have_the_grid_root_distribution():
    """The paper's §3.3 sampler W_s (a + S z): moments match (W_s a, W_s S Sᵀ W_sᵀ)."""
    X, y, Xs = _data(t=5)
    gp = pn.gp.ExactGP(_ski(m=12), 0.01).fit(X, y)
    G = gp.build_love_cache(rank=30).grid
    F = G.sample(Xs, 4000, torch.Generator().manual_seed(5))
    Ws = G.grid.interpolation(Xs)
    WS = Ws @ G.sampling_root
    t = Xs.shape[0]
    z = moment_threshold(t, FALSE_ALARM)
    zm, zc = moment_z_scores(F, Ws @ G.mean, WS @ WS.mT)
    assert zm <= z and zc <= z, (zm, zc, z)
    torch.testing.assert_close(Ws @ G.mean, gp.posterior(Xs).mean, rtol=0, atol=1e-10)
    with pytest.raises(TypeError, match="generator"):
        G.sample(Xs, 3, None)


def test_fit_binds_the_grid_to_the_training_inputs():
    """A grid without bounds is fixed at fit to cover X; test points beyond it are named."""
    X, y, Xs = _data(n=100)
    k = pn.kernels.GridInterpolation(pn.kernels.RBF(lengthscale=0.3), 20)
    gp = _itergp(k, X, y, iters=30)
    assert gp.kernel is not k and gp.kernel.base_kernel is k.base_kernel
    assert k.grid_bounds is None and gp.kernel.grid_bounds is not None
    post = gp.posterior(Xs, method="love", rank=10)
    assert post.var.shape == (25,)
    with pytest.raises(ValueError, match="Xs has a point outside the grid"):
        gp.posterior(Xs + 2.0, method="love", cache=post.love_cache)
    # refitting on other data binds again, from the kernel as given
    gp.fit(X + 5.0, y)
    assert gp.kernel.grid(X + 5.0).interior(0)[0] > 4.0


def test_exact_gp_refuses_large_dense_ski():
    k = _ski()
    X = torch.rand(SKI_DENSE_LIMIT + 1, 2, dtype=F64)
    with pytest.raises(ValueError, match="IterGP"):
        pn.gp.ExactGP(k, 0.1).fit(X, torch.zeros(SKI_DENSE_LIMIT + 1, dtype=F64))


@pytest.mark.parametrize(
    "model",
    [
        lambda k: pn.gp.IterNCGP(
            k, pn.likelihoods.Bernoulli(), pn.policies.CG(), pn.stopping.MaxIterations(5)
        ),
        lambda k: pn.gp.bayes.LogHyperparameters(k, 0.1),
    ],
    ids=["iterncgp", "sgld"],
)
def test_models_without_ski_support_say_so(model):
    with pytest.raises(TypeError, match=r"SKI kernels \(GridInterpolation\) work with ExactGP"):
        model(_ski())


def test_standard_estimator_gradient_through_the_grid_is_exact_given_its_probes():
    """The estimator's SKI gradient = autograd of its surrogate on the dense SKI kernel."""
    X, y, _ = _data(n=150)
    base = pn.kernels.Matern(nu=2.5, lengthscale=0.3)
    k = _ski(base, m=16)
    est = StandardEstimator(4, generator=torch.Generator().manual_seed(0))
    noise = 0.05
    B = est.targets(k, X, noise, y)
    with torch.no_grad():
        Khat = k(X) + noise * torch.eye(150, dtype=F64)
        V = torch.linalg.solve(Khat, B)
    est.backward(k, X, noise, y, V)
    got = [p.grad.clone() for p in base.parameters()]
    base.zero_grad()
    Khat = k(X) + noise * torch.eye(150, dtype=F64)
    surrogate = -0.5 * V[:, 0] @ Khat @ V[:, 0] + 0.5 / 4 * (V[:, 1:] * (Khat @ B[:, 1:])).sum()
    surrogate.backward()
    for a, p in zip(got, base.parameters(), strict=True):
        torch.testing.assert_close(a, p.grad, rtol=1e-9, atol=1e-11)


def test_hyperparameter_learning_with_cg_and_the_standard_estimator():
    """Adam on SKI hyperparameters with pn.cg solves raises the exact SKI log likelihood."""
    X, y, _ = _data(n=400, seed=5)
    base = pn.kernels.RBF(lengthscale=torch.tensor([1.0, 1.0]), outputscale=0.3)
    k = _ski(base, m=30)
    raw_noise = torch.tensor(0.0, dtype=F64, requires_grad=True)
    opt = torch.optim.Adam([*base.parameters(), raw_noise], lr=0.1)
    est = StandardEstimator(8, generator=torch.Generator().manual_seed(1))

    def lml():
        noise = float(torch.nn.functional.softplus(raw_noise.detach()))
        return float(pn.gp.ExactGP(k, noise).log_marginal_likelihood(X, y).detach())

    start = lml()
    for _ in range(25):
        opt.zero_grad()
        noise = torch.nn.functional.softplus(raw_noise)
        B = est.targets(k, X, noise, y)
        A = k.linop(X).add_diagonal(float(noise.detach()))
        V, _ = pn.cg(A, B, rtol=1e-8, maxiter=1000)
        est.backward(k, X, noise, y, V)
        opt.step()
    assert lml() > start + 50, (start, lml())


def test_samples_when_the_test_covariance_has_lower_rank_than_the_cache():
    """t points on a 16-point grid: rank(W_s C W_sᵀ) ≤ 16 < k; Lanczos runs past it."""
    g = torch.Generator().manual_seed(0)
    X = torch.rand(1000, 1, generator=g, dtype=F64)
    y = torch.sin(12 * X[:, 0]) + 0.3 * torch.randn(1000, generator=g, dtype=F64)
    k = _ski(pn.kernels.RBF(lengthscale=0.2), m=16, bounds=[(0.0, 1.0)])
    gp = pn.gp.ExactGP(k, 0.1).fit(X, y)
    Xs = torch.linspace(0, 1, 100, dtype=F64).unsqueeze(-1)
    post = gp.posterior(Xs, method="love", rank=20)
    S = post.sample_root()
    assert S.shape[1] <= 20
    C = post.cov()
    torch.testing.assert_close(S @ S.mT, C, rtol=0, atol=krylov_tol(F64, 1e4) * float(C.max()))
    assert post.sample(3, generator=torch.Generator().manual_seed(0)).shape == (100, 3)


def test_a_cache_reused_over_iterations_follows_the_current_weights():
    """IterGP.iterate keeps K̂: a cache built at iteration 1 serves iteration 5 with its mean."""
    X, y, Xs = _data(n=200, t=5)
    gp = pn.gp.IterGP(_ski(m=16), 0.01, pn.policies.CG(), pn.stopping.MaxIterations(5))
    cache = None
    for state, _ in gp.iterate(X, y, Xs):
        if state.iteration == 1:
            cache = gp.build_love_cache(rank=10)
    assert cache is not None and cache.A is gp.A
    fast = gp.posterior(Xs, method="love", cache=cache)
    slow = gp.posterior(Xs, method="love", cache=dataclasses.replace(cache, grid=None))
    torch.testing.assert_close(fast.mean, slow.mean, rtol=0, atol=exact_tol(F64, 200) * 100)
    torch.testing.assert_close(fast.mean, gp.posterior(Xs).mean, rtol=0, atol=1e-10)


def test_inputs_outside_the_grid_are_named():
    X, y, Xs = _data(n=50, t=4)
    k = _ski(m=8)
    with pytest.raises(ValueError, match=r"^X has a point outside the grid"):
        pn.gp.ExactGP(k, 0.1).fit(X + 2.0, y)
    gp = pn.gp.ExactGP(k, 0.1).fit(X, y)
    with pytest.raises(ValueError, match=r"^Xs has a point outside the grid"):
        gp.build_love_cache(rank=3, Xs=Xs + 2.0)
    it = pn.gp.IterGP(k, 0.1, pn.policies.CG(), pn.stopping.MaxIterations(2))
    with pytest.raises(ValueError, match=r"^Xs has a point outside the grid"):
        next(it.iterate(X, y, Xs + 2.0))


def test_a_kernel_assigned_before_fit_is_used():
    X, y, _ = _data(n=40, t=3)
    gp = pn.gp.ExactGP(pn.kernels.RBF(lengthscale=0.1), 0.1).fit(X, y)
    gp.kernel = pn.kernels.RBF(lengthscale=1.0)
    gp.fit(X, y)
    assert float(gp.kernel.lengthscale.detach()) == pytest.approx(1.0)
    gp.fit(X, y)  # refitting keeps it
    assert float(gp.kernel.lengthscale.detach()) == pytest.approx(1.0)


def test_frozen_ski_hyperparameters_with_inputs_requiring_grad():
    """Only the noise is trained (kernel frozen, X requires grad): no crash, noise gradient."""
    X, y, _ = _data(n=80)
    base = pn.kernels.RBF(lengthscale=0.3).requires_grad_(False)
    k = _ski(base, m=12)
    raw = torch.tensor(-2.0, dtype=F64, requires_grad=True)
    noise = torch.nn.functional.softplus(raw)
    est = StandardEstimator(3, generator=torch.Generator().manual_seed(0))
    Xg = X.clone().requires_grad_()
    B = est.targets(k, Xg, noise, y)
    with torch.no_grad():
        V = torch.linalg.solve(k(X) + noise.detach() * torch.eye(80, dtype=F64), B)
    est.backward(k, Xg, noise, y, V)
    assert raw.grad is not None and torch.isfinite(raw.grad)
