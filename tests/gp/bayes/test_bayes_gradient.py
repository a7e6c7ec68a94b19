"""Gradients of the log marginal likelihood in log space (Filippone & Engler 2015, eqs. 8–9)."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.bayes import LogHyperparameters, LogMarginalGradient, exact_log_marginal
from pnsolve.gp.bayes.dense_surrogate import DenseSurrogate
from pnsolve.testing import rtol_for, statistical_threshold
from pnsolve.testing.device import suite_device

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
FALSE_ALARM = 1e-4  # per component; 3 components per test, three tests
Z = statistical_threshold(FALSE_ALARM)
DRAWS = 2000  # gradient estimates per statistical test
N = 60


def _clustered(n: int = N, seed: int = 0):
    """Inputs at 3 distinct locations: K has rank 3, K̂ = K + λI has 4 distinct
    eigenvalues, so CG terminates after at most 4 steps and ULISSE's variance is small
    (unbiasedness is tested where CG terminates early)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.rand(3, 2, generator=g, dtype=F64)
    X = centres[torch.arange(n) % 3]
    y = torch.randn(n, generator=g, dtype=F64)
    return X, y


def _params(parametrization="log_tau"):
    kernel = pn.kernels.RBF(lengthscale=0.3, outputscale=1.0)
    return LogHyperparameters(kernel, 0.5, parametrization=parametrization)


@pytest.mark.parametrize(
    "kernel",
    [
        pn.kernels.RBF(lengthscale=0.8, outputscale=1.2),
        pn.kernels.Matern(nu=1.5, lengthscale=torch.tensor([0.7, 1.3]), outputscale=1.5),
        pn.kernels.RationalQuadratic(0.9, 1.5),
        pn.kernels.Constant(0.8) * pn.kernels.RBF(0.9)
        + pn.kernels.Periodic(torch.tensor([1.1, 0.7]), 1.3) * pn.kernels.Linear(0.4)
        + pn.kernels.White(0.05),
    ],
    ids=["rbf", "matern-ard", "rq", "expression"],
)
def test_exact_gradient_matches_central_differences(kernel):
    """Every positive parameter is in θ (the generic layout for all but RBF and Matérn)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 2, generator=g, dtype=F64)
    y = torch.randn(40, generator=g, dtype=F64)
    params = LogHyperparameters(kernel, 0.3)
    theta = params.initial().to(suite_device())
    _, grad = exact_log_marginal(params, X, y, theta, grad=True)
    h = 1e-6
    for i in range(params.dim):
        e = torch.zeros(params.dim, dtype=F64)
        e[i] = h
        fd = (
            exact_log_marginal(params, X, y, theta + e)[0]
            - exact_log_marginal(params, X, y, theta - e)[0]
        ) / (2 * h)
        # central differences: O(h²) truncation plus O(eps/h) rounding of the values
        assert abs(float(grad[i]) - fd) <= math.sqrt(rtol_for(F64)) * (1 + abs(fd))


def test_log_tau_parametrization_is_the_papers_covariance():
    X, y = _clustered()
    params = _params("log_tau")
    theta = torch.tensor([0.1, -0.3, -1.0], dtype=F64)
    s, t, lam = theta.exp()
    K = s * torch.exp(-t * torch.cdist(X, X) ** 2) + lam * torch.eye(N, dtype=F64)
    ref = torch.distributions.MultivariateNormal(torch.zeros(N, dtype=F64), K).log_prob(y)
    value, _ = exact_log_marginal(params, X, y, theta)
    assert value == pytest.approx(float(ref), rel=rtol_for(F64))
    assert params.names == ("log_sigma", "log_tau", "log_lambda")


def test_old_parametrization_name_seed_still_works_and_warns():
    X, y = _clustered()
    with pytest.warns(DeprecationWarning, match="'log_tau'"):
        old = _params("seed")
    new = _params("log_tau")
    assert old.parametrization == "log_tau"
    assert old.names == new.names
    theta = torch.tensor([0.1, -0.3, -1.0], dtype=F64)
    assert torch.equal(old.initial(), new.initial())
    assert exact_log_marginal(old, X, y, theta)[0] == exact_log_marginal(new, X, y, theta)[0]


def _estimates(
    method: str, alpha: float, seed: int = 1, backend: str = "auto"
) -> tuple[torch.Tensor, torch.Tensor]:
    X, y = _clustered()
    params = _params()
    theta = params.initial().to(suite_device())
    exact = LogMarginalGradient(params, X, y, method="exact")(theta).grad
    est = LogMarginalGradient(
        params, X, y, method=method, generator=torch.Generator().manual_seed(seed),
        redraw_every=1, alpha=alpha, backend=backend,
    )  # fmt: skip
    return exact, torch.stack([est(theta).grad for _ in range(DRAWS)])


@pytest.mark.statistical
@pytest.mark.parametrize("backend", ["dense", "chunked"])
def test_ulisse_gradient_is_unbiased(backend):
    """Both ways of forming the bilinear forms: stored distances (dense) and row blocks."""
    exact, G = _estimates("ulisse", 0.3 * math.sqrt(N), backend=backend)
    z = (G.mean(0) - exact) / (G.std(0) / math.sqrt(DRAWS))
    assert bool((z.abs() <= Z).all()), z


@pytest.mark.statistical
def test_truncated_cg_gradient_is_biased():
    exact, G = _estimates("cg", 0.3 * math.sqrt(N))
    z = (G.mean(0) - exact) / (G.std(0) / math.sqrt(DRAWS))
    assert float(z.abs().max()) > Z, z


def test_probes_are_kept_and_solves_warm_started_between_redraws():
    X, y = _clustered()
    params = _params()
    est = LogMarginalGradient(
        params, X, y, generator=torch.Generator().manual_seed(0), redraw_every=3, alpha=0.5
    )
    theta = params.initial().to(suite_device())
    flags = [est(theta).redrawn for _ in range(7)]
    assert flags == [True, False, False, True, False, False, True]
    probes = est.probes.clone()
    est(theta + 0.01)
    assert torch.equal(est.probes, probes)  # kept between redraws
    assert est.warm is not None and est.warm.shape == (N, 1 + est.num_probes)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "newton"}, "method must be one of"),
        ({"num_probes": 0}, "num_probes"),
        ({"alpha": -1.0}, "alpha"),
        ({"beta": 0.0}, "beta"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, match):
    X, y = _clustered()
    with pytest.raises((ValueError, TypeError), match=match):
        LogMarginalGradient(_params(), X, y, generator=torch.Generator(), **kwargs)


def test_a_generator_is_required_for_stochastic_gradients():
    X, y = _clustered()
    with pytest.raises(TypeError, match="generator"):
        LogMarginalGradient(_params(), X, y, method="ulisse")


def test_truncated_cg_takes_a_step_per_column_and_counts_its_products(monkeypatch):
    """``method="cg"``: CG until ‖r‖ ≤ α with at least one step per column (ULISSE's
    deterministic part), its reported products equal the products made. At the same θ
    the second call's warm start is within α for every column, yet each column moves."""
    from pnsolve.testing.counting import CountingOperator

    X, y = _clustered()
    params = _params()
    est = LogMarginalGradient(params, X, y, method="cg", generator=torch.Generator().manual_seed(1),
                              alpha=1.0, redraw_every=10, preconditioner_rank=0)  # fmt: skip
    build = est.system
    ops: list[CountingOperator] = []

    def counted(theta):
        ops.append(CountingOperator(build(theta)))
        return ops[-1]

    monkeypatch.setattr(est, "system", counted)
    theta = params.initial().to(suite_device())
    for _ in range(2):
        before = None if est.warm is None else est.warm.clone()
        out = est(theta)
        assert out.products == ops[-1].products
        if before is None:  # cold: one CG run, no restart (it was two, +2 products)
            B = torch.cat([y[:, None], est.probes], 1)
            _, info = pn.cg(build(theta), B, rtol=0.0, atol=1.0)
            assert out.products == info.products
        else:
            residual = torch.cat([y[:, None], est.probes], 1) - build(theta).matmat(before)
            assert bool((torch.linalg.vector_norm(residual, dim=0) <= 1.0).all())
            assert bool((est.warm != before).any(0).all())  # every column took a step


@pytest.mark.parametrize(
    ("kernel", "parametrization"),
    [
        (pn.kernels.RBF(lengthscale=0.7), "log_tau"),
        (pn.kernels.RBF(lengthscale=0.7), "log"),
        (pn.kernels.Matern(nu=1.5, lengthscale=0.7), "log"),
        (pn.kernels.Matern(nu=2.5, lengthscale=0.7), "log"),
    ],
)
def test_dense_surrogate_gradient_equals_autograd_of_the_kernel_matrix(kernel, parametrization):
    """``∇_θ Σ_c u_cᵀ K̂(θ) w_c`` from stored distances = autograd through ``K̂(θ)``."""
    g = torch.Generator().manual_seed(2)
    X = torch.randn(50, 3, generator=g, dtype=F64)
    U, W = torch.randn(2, 50, 4, generator=g, dtype=F64)
    params = LogHyperparameters(kernel, 0.3, parametrization=parametrization)
    theta = params.initial().to(suite_device()) + torch.tensor([0.2, -0.3, -0.5], dtype=F64)
    fast = DenseSurrogate(params, X)
    K_hat = fast.system(theta).to_dense()
    got = fast.gradient(U, W)
    k = params.kernel_at(theta)
    (U * (k(X) @ W)).sum().backward()
    want = params.chain_rule(theta, float((U * W).sum()))
    ref_K = k(X).detach() + params.noise_at(theta) * torch.eye(50, dtype=F64)
    torch.testing.assert_close(K_hat, ref_K, rtol=rtol_for(F64), atol=rtol_for(F64))
    torch.testing.assert_close(got, want, rtol=rtol_for(F64), atol=rtol_for(F64))
    with pytest.raises(RuntimeError, match="system"):
        fast.gradient(U, W)  # one gradient per system: the graph is released


def _small_noise(n: int = 120, seed: int = 0):
    """Smooth targets on repeated grid inputs with noise variance 2e-3 (like yacht): κ(K̂)
    ≈ 1e5, where plain CG needs many steps and its increments past the threshold shrink
    slowly (the roulette's heavy tail)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.linspace(-1.5, 1.5, 12, dtype=F64)[torch.randint(0, 12, (n, 2), generator=g)]
    y = torch.sin(2 * X[:, 0]) * torch.exp(X[:, 1]) + 0.04 * torch.randn(n, generator=g, dtype=F64)
    params = LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1, parametrization="log_tau")
    theta = torch.tensor([0.5, -1.0, math.log(2e-3)], dtype=F64)
    return params, X, (y - y.mean()) / y.std(), theta


def _z(G: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    return (G.mean(0) - exact) / (G.std(0) / math.sqrt(G.shape[0]))


@pytest.mark.statistical
def test_a_stale_preconditioner_keeps_the_gradient_unbiased():
    """The factor is built where the probes are drawn and reused while θ moves: CG
    converges for any SPD preconditioner, so every estimate stays unbiased. Calls
    alternate between the anchor θ_a (probes and factor drawn there) and θ (estimated
    with the factor of θ_a)."""
    params, X, y, theta = _small_noise(60)
    anchor = theta + torch.tensor([0.3, 0.2, 0.4], dtype=F64)
    exact = exact_log_marginal(params, X, y, theta, grad=True)[1]
    est = LogMarginalGradient(
        params, X, y, generator=torch.Generator().manual_seed(4), redraw_every=2,
        alpha=0.05 * math.sqrt(60), preconditioner_rank=8,
    )  # fmt: skip
    G = []
    for _ in range(DRAWS):
        est(anchor)
        G.append(est(theta).grad)
        assert torch.equal(est.anchor, anchor)
    z = _z(torch.stack(G), exact)
    assert bool((z.abs() <= Z).all()), z


def test_the_preconditioner_cuts_the_products_and_is_rebuilt_from_a_checkpoint():
    params, X, y, theta = _small_noise()
    counts = {}
    for rank in (0, 100):
        est = LogMarginalGradient(
            params, X, y, generator=torch.Generator().manual_seed(0), alpha=0.01 * math.sqrt(120),
            preconditioner_rank=rank,
        )  # fmt: skip
        counts[rank] = sum(est(theta).products for _ in range(3))
    assert counts[100] * 3 <= counts[0], counts
    # a restored estimator rebuilds the factor at the saved anchor: the same estimates
    est = LogMarginalGradient(params, X, y, generator=torch.Generator().manual_seed(0))
    est(theta)
    state, g_state = est.state_dict(), est.generator.get_state()
    again = LogMarginalGradient(params, X, y, generator=torch.Generator())
    again.load_state_dict(state)
    again.generator.set_state(g_state)
    step = theta + 0.01
    assert torch.equal(est(step).grad, again(step).grad)


def _yacht_like(n: int = 277, seed: int = 0):
    """Six inputs on small grids, a target growing fast in the last, noise variance 2e-3
    (like yacht): κ(K̂) ≈ 2e6 at the posterior mode ``theta``."""
    g = torch.Generator().manual_seed(seed)
    cols = [
        torch.linspace(-1, 1, levels, dtype=F64)[torch.randint(0, levels, (n,), generator=g)]
        for levels in (5, 4, 6, 5, 4, 14)
    ]
    X = torch.stack(cols, 1)
    y = torch.exp(2.3 * X[:, 5]) * (1 + 0.1 * X[:, 0] - 0.05 * X[:, 2])
    y = y + 0.02 * torch.randn(n, generator=g, dtype=F64)
    X = (X - X.mean(0)) / X.std(0)
    params = LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1, parametrization="log_tau")
    theta = torch.tensor([2.88, -3.51, -6.25], dtype=F64)
    return params, X, (y - y.mean()) / y.std(), theta


@pytest.mark.statistical
def test_default_estimates_have_no_heavy_tail_on_a_small_noise_system():
    """With the chains' default settings the estimates at a small-noise θ average to the
    exact gradient. The former defaults (plain CG, 4 probes redrawn, ``alpha = 0.1 √n``)
    gave z = −55 in ``log λ`` over 300 draws here: rare huge roulette terms, a variance
    too heavy-tailed for any finite run (what pulled the SGLD chains apart)."""
    from pnsolve.gp.bayes import ChainConfig

    params, X, y, theta = _yacht_like()
    cfg = ChainConfig()
    exact = exact_log_marginal(params, X, y, theta, grad=True)[1]
    est = LogMarginalGradient(
        params, X, y, generator=torch.Generator().manual_seed(5), redraw_every=1,
        num_probes=cfg.num_probes, alpha=cfg.alpha_for(X.shape[0]),
        preconditioner_rank=cfg.preconditioner_rank,
    )  # fmt: skip
    z = _z(torch.stack([est(theta).grad for _ in range(DRAWS // 4)]), exact)
    assert bool((z.abs() <= Z).all()), z
