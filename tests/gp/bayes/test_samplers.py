"""SGLD and Metropolis–Hastings on targets with known answers."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from pnsolve.gp.bayes import SGLD, MetropolisHastings, step_schedule
from pnsolve.testing import rtol_for, statistical_threshold

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
FALSE_ALARM = 1e-4  # per checked moment
Z = statistical_threshold(FALSE_ALARM)
MU = torch.tensor([1.0, -2.0], dtype=F64)
SIGMA = torch.tensor([[1.0, 0.5], [0.5, 2.0]], dtype=F64)
EPS = 0.5  # frozen SGLD step: φ = 1 − ε/2 per step on this target
STEPS = 20_000


def _gaussian_gradient(noise: float, seed: int):
    """Exact ``∇ log N(μ, Σ)`` plus zero-mean noise: an unbiased estimate."""
    g = torch.Generator().manual_seed(seed)
    inv = torch.linalg.inv(SIGMA)

    def grad(theta):
        return SimpleNamespace(
            grad=-inv @ (theta - MU) + noise * torch.randn(2, generator=g, dtype=F64), products=1
        )

    return grad


def _zero_prior(theta):
    return torch.zeros_like(theta)


def test_step_schedule_hits_both_ends():
    a, b = step_schedule(1e-1, 1e-4, 40_000)
    assert a / b == pytest.approx(1e-1, rel=rtol_for(F64))
    assert a / (b + 39_999) == pytest.approx(1e-4, rel=rtol_for(F64))
    with pytest.raises(ValueError, match="gamma"):
        step_schedule(1e-1, 1e-4, 10, gamma=0.4)


@pytest.mark.statistical
def test_frozen_sgld_with_exact_gradient_has_the_known_stationary_law():
    # with M = Σ and the exact gradient, θ − μ is a VAR(1) with φ = 1 − ε/2 and
    # stationary covariance Σ / (1 − ε/4) (the O(ε) discretisation bias, exactly)
    sgld = SGLD(_gaussian_gradient(0.0, 0), _zero_prior, SIGMA,
                step_start=EPS * (1 + 1e-12), step_end=EPS, freeze_threshold=0.0)  # fmt: skip
    result = sgld.run(torch.zeros(2, dtype=F64), STEPS, torch.Generator().manual_seed(1))
    x = result.samples[1000:]
    phi = 1 - EPS / 2
    ess = x.shape[0] * (1 - phi) / (1 + phi)  # AR(1) effective sample size
    target = SIGMA / (1 - EPS / 4)
    mean_se = (target.diagonal() / ess).sqrt()
    assert bool(((x.mean(0) - MU).abs() <= Z * mean_se).all()), x.mean(0)
    var = x.var(0)
    # AR(1) variance estimator: SE ≈ var · √(2 (1 + φ²)/(1 − φ²) / N)
    var_se = target.diagonal() * math.sqrt(2 * (1 + phi**2) / (1 - phi**2) / x.shape[0])
    assert bool(((var - target.diagonal()).abs() <= Z * var_se).all()), var
    assert result.products == STEPS


def test_the_step_size_freezes_when_gradient_noise_is_small():
    # gradient noise variance s² I: the ratio (ε/4) λmax(M^½ V M^½) ≈ ε s² λmax(Σ) / 4
    s = 0.5
    sgld = SGLD(_gaussian_gradient(s, 3), _zero_prior, SIGMA, step_start=1e-1, step_end=1e-4,
                freeze_threshold=0.002, variance_batch=100)  # fmt: skip
    result = sgld.run(MU.clone(), 4000, torch.Generator().manual_seed(4))
    assert result.frozen_at is not None
    t = next(t for t, r in result.ratios if r < 0.002)
    assert result.frozen_at == t + 1
    # after freezing the step size is constant, before it the schedule decreases
    frozen = result.step_sizes[result.frozen_at :]
    assert bool((frozen == frozen[0]).all())
    assert bool((result.step_sizes[1 : result.frozen_at].diff() < 0).all())
    assert result.kept.shape[0] == 4000 - result.frozen_at


def test_a_run_cut_into_pieces_is_identical():
    make = lambda: SGLD(_gaussian_gradient(0.3, 7), _zero_prior, SIGMA, variance_batch=10)  # noqa: E731
    whole = make().run(torch.zeros(2, dtype=F64), 500, torch.Generator().manual_seed(8))
    sgld = make()
    g = torch.Generator().manual_seed(8)
    state = sgld.start(torch.zeros(2, dtype=F64), 500)
    for _ in range(7):
        sgld.advance(state, 73, g)
    assert torch.equal(state.result().samples, whole.samples)
    assert state.frozen_at == whole.frozen_at


@pytest.mark.parametrize("scale", [0.05, 2.38 / math.sqrt(2), 20.0])
def test_metropolis_hastings_adaptation_settles_inside_the_window(scale):
    """From far too small or far too large proposals, after the adaptive phase the rate
    is inside 0.2–0.4 for every seed (the old one-sided rule left 0.44 on concrete)."""
    inv = torch.linalg.inv(SIGMA)
    for seed in range(5):
        mh = MetropolisHastings(lambda th: float(-0.5 * (th - MU) @ inv @ (th - MU)),
                                torch.eye(2, dtype=F64), adapt=3000, scale=scale)  # fmt: skip
        state = mh.run(torch.zeros(2, dtype=F64), 6000, torch.Generator().manual_seed(seed))
        assert 0.2 <= state.acceptance_rate(3000) <= 0.4, (seed, state.acceptance_rate(3000))


@pytest.mark.statistical
def test_metropolis_hastings_adapts_into_the_window_and_targets_the_density():
    inv = torch.linalg.inv(SIGMA)
    mh = MetropolisHastings(lambda th: float(-0.5 * (th - MU) @ inv @ (th - MU)),
                            torch.eye(2, dtype=F64), adapt=3000)  # fmt: skip
    state = mh.run(torch.zeros(2, dtype=F64), STEPS, torch.Generator().manual_seed(2))
    assert 0.2 <= state.acceptance_rate(3000) <= 0.4
    x = state.samples[3000:]
    # batch-means standard error (50 batches) for the mean of a correlated chain
    batches = x[: (x.shape[0] // 50) * 50].reshape(50, -1, 2).mean(1)
    se = batches.std(0) / math.sqrt(50)
    assert bool(((x.mean(0) - MU).abs() <= Z * se).all()), (x.mean(0), se)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: SGLD(lambda t: t, _zero_prior, -torch.eye(2, dtype=F64)), "positive definite"),
        (lambda: SGLD(lambda t: t, _zero_prior, torch.eye(2, dtype=F64), step_end=1.0), "step"),
        (lambda: MetropolisHastings(lambda t: 0.0, torch.ones(2, 3)), "proposal_cov"),
        (
            lambda: MetropolisHastings(lambda t: 0.0, torch.eye(2), acceptance_range=(0.5, 0.1)),
            "acceptance_range",
        ),
    ],
)
def test_bad_configurations_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_non_finite_gradient_stops_the_chain():
    bad = SGLD(lambda t: SimpleNamespace(grad=torch.full((2,), math.nan, dtype=F64)),
               _zero_prior, SIGMA)  # fmt: skip
    with pytest.raises(ArithmeticError, match="not finite"):
        bad.run(torch.zeros(2, dtype=F64), 10, torch.Generator())


def test_a_chain_thrown_out_of_the_positive_definite_region_says_why():
    import pnsolve as pn

    def gradient(theta):
        raise pn.NotPositiveDefiniteError("A is not positive definite: negative curvature")

    sgld = SGLD(gradient, _zero_prior, SIGMA)
    with pytest.raises(ArithmeticError, match="numerically positive definite at iteration 0"):
        sgld.run(torch.zeros(2, dtype=F64), 10, torch.Generator())
