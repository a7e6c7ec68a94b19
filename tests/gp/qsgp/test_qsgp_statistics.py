"""QSGP's estimators: unbiased (Gaussian), control variates, Theorem 3's bound (statistical).

Each check is a two-sided z-test (one-sided for the bound) at false-alarm level 1e-4
with a fixed seed; variance reductions are F-tests at the same level.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import f as f_dist

from pnsolve.testing import statistical_threshold

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.statistical]

FALSE_ALARM = 1e-4
Z = statistical_threshold(FALSE_ALARM)
DRAWS = 2000
F64 = torch.float64


def _draws(q, X, y, control_variates=True, seed=0):
    return torch.tensor(
        [q.elbo_estimate(X, y, generator=torch.Generator().manual_seed(seed + s),
                         control_variates=control_variates) for s in range(DRAWS)],
        dtype=F64,
    )  # fmt: skip


def _z(samples, target):
    return float((samples.mean() - target) / (samples.std() / math.sqrt(samples.numel())))


@pytest.mark.parametrize("covariance", ["diagonal", "chevron", "full"])
@pytest.mark.parametrize("linear", [False, True])
def test_the_gaussian_elbo_estimate_is_unbiased(covariance, linear, problem, model):
    """Theorems 1–2 and Proposition 2 with the control variates of eq. 3 / Prop. 3
    (and appendix F.2's linear one): the mean of the estimates is the exact ELBO."""
    X, y = problem("gaussian")
    q = model("gaussian", covariance=covariance, X=X, batch_size=15, feature_batch_size=8,
              control_variate_rank=25, linear_control_variate=linear)  # fmt: skip
    exact = q.elbo(X, y)
    assert abs(_z(_draws(q, X, y), exact)) <= Z


def test_control_variates_keep_the_mean_and_cut_the_variance(problem, model):
    """Seed Fig. 1 at one point: μ a prior draw, the estimate's variance dominated by the
    term ``(1/σ²) μᵀΦᵀΦμ`` the control variate targets (y = 0 and a constant mean-field
    ``C`` make the others nearly constant). Same draws with and without it: the paired
    difference has mean zero; the variance falls (F-tests), more with a larger n̄."""
    X, _ = problem("gaussian", n=400)
    y = torch.zeros(400, dtype=F64)
    sds = []
    for nbar in (0, 20, 200):
        q = model("gaussian", m=60, covariance="diagonal", X=X, batch_size=20,
                  feature_batch_size=30, control_variate_rank=nbar)  # fmt: skip
        with torch.no_grad():
            q.mean_weights.copy_(torch.randn(60, generator=torch.Generator().manual_seed(9),
                                             dtype=F64))  # fmt: skip
            q.cov.log_diag.fill_(-3.0)
        with_cv = _draws(q, X, y)
        if nbar:
            without = _draws(q, X, y, control_variates=False)
            assert abs(_z(with_cv - without, 0.0)) <= Z
        sds.append(float(with_cv.std()))
    crit = f_dist.ppf(1 - FALSE_ALARM, DRAWS - 1, DRAWS - 1)
    assert (sds[0] / sds[1]) ** 2 > crit
    assert (sds[1] / sds[2]) ** 2 > crit


@pytest.mark.parametrize("likelihood", ["bernoulli", "poisson"])
def test_theorem_3_bounds_the_elbo_from_below(likelihood, problem, model):
    """E[bound] ≤ ELBO (one-sided z-test), with a gap that closes as m̃ grows."""
    X, y = problem(likelihood)
    means, ses = [], []
    for mt in (5, 15):
        q = model(likelihood, covariance="chevron", X=X, batch_size=30, feature_batch_size=mt)
        exact = q.elbo(X, y)
        draws = _draws(q, X, y)
        assert _z(draws, exact) <= Z  # not significantly above the ELBO
        means.append(float(draws.mean()))
        ses.append(float(draws.std()) / math.sqrt(DRAWS))
    # the gap closes: the m̃ = 15 bound is significantly higher (one-sided two-sample z)
    assert (means[1] - means[0]) / math.hypot(*ses) >= Z
    # and is still a strict bound (one-sided z below the ELBO)
    assert (exact - means[1]) / ses[1] >= Z
