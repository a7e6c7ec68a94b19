"""Statistical calibration of solution beliefs (DESIGN §2 rule 8, §3).

Solutions are drawn from the prior (inverse prior: ``x* ~ N(0, A⁻¹)``; general prior:
``x* ~ N(0, σ² I)``), ``b = A x*``, and the solver runs ``i < n`` iterations. Under a
calibrated belief the whitened error ``eᵀ Σ_i⁺ e`` of ``e = x* − x_i`` is
``χ²(rank Σ_i)``. The mean over ``DRAWS`` draws (fixed seed) is z-tested against the
rank at false-alarm level ``FALSE_ALARM`` (two-sided).

Non-adaptive policies (sequential unit vectors, Gaussian random actions) condition on
information independent of ``b`` and are calibrated. CG's actions depend on ``b``;
with the inverse prior its belief is known to be miscalibrated (far too wide), and the
test must detect that.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.problems import make_problem
from pnsolve.testing import statistical_threshold
from pnsolve.testing.calibration import whitened_error_statistics

N, ITERATIONS, DRAWS = 20, 6, 200
FALSE_ALARM = 1e-3
SIGMA2 = 0.5


def _A():
    return make_problem("exponential", N, generator=torch.Generator().manual_seed(0), cond=1e2).A


NON_ADAPTIVE = {
    "unitvector": pn.policies.UnitVector,
    "random": pn.policies.Random,
}


@pytest.mark.statistical
@pytest.mark.parametrize("prior", ["inverse", SIGMA2])
@pytest.mark.parametrize("name", sorted(NON_ADAPTIVE))
def test_non_adaptive_policies_are_calibrated(name, prior):
    result = whitened_error_statistics(
        _A(), NON_ADAPTIVE[name](), prior, ITERATIONS, DRAWS, torch.Generator().manual_seed(11)
    )
    assert result.rank == N - ITERATIONS
    assert abs(result.z) <= statistical_threshold(FALSE_ALARM), (result.mean, result.rank)


@pytest.mark.statistical
def test_cg_with_inverse_prior_is_detected_as_miscalibrated():
    result = whitened_error_statistics(
        _A(), pn.policies.CG(), "inverse", ITERATIONS, DRAWS, torch.Generator().manual_seed(11)
    )
    assert result.rank == N - ITERATIONS
    # far beyond the threshold, and on the under-confident side (errors smaller than
    # the covariance claims)
    assert result.z < -statistical_threshold(FALSE_ALARM)
    assert result.ratio < 1


@pytest.mark.statistical
def test_the_statistic_uses_the_known_rank_of_the_covariance():
    # n = 130, 30 random actions on an ill-conditioned system: Σ_i has rank exactly 100.
    # Thresholding its eigenvalues (relative to the largest, at κ·eps) counted 75 here
    # (and 105 on another reported case, z = −3.6); the known rank n − i is exact.
    A = make_problem("exponential", 130, generator=torch.Generator().manual_seed(1), cond=1e8).A
    result = whitened_error_statistics(
        A, pn.policies.Random(), "inverse", 30, 100, torch.Generator().manual_seed(5)
    )
    assert result.rank == 100
    assert abs(result.z) <= statistical_threshold(FALSE_ALARM), result.z
    assert result.null_error <= 1e-6


def test_converged_solves_leave_no_degrees_of_freedom_and_do_not_raise():
    # CG on a matrix with 4 distinct eigenvalues converges in 4 steps and then adds
    # rounding-level directions until it breaks down (draws may stop at different
    # iterations); n unit vectors leave Σ_n = 0. Neither raises; the rank is the known
    # n − rank C_i of each draw; with r = 0 the check is the error outside range Σ_i,
    # which must be rounding.
    A = make_problem(
        "clustered", N, generator=torch.Generator().manual_seed(2), clusters=[1.0, 0.5, 0.2, 0.1]
    ).A
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(N))
    cg = whitened_error_statistics(
        A, pn.policies.CG(), "inverse", N, 20, torch.Generator().manual_seed(3)
    )
    g = torch.Generator().manual_seed(3)
    lam, Q = torch.linalg.eigh(A.to_dense())
    x = (Q * lam.rsqrt()) @ torch.randn(N, generator=g, dtype=lam.dtype)
    first = solver.solve(A, A @ x, generator=g)[0]
    assert int(cg.ranks[0]) == N - first.rank and bool((cg.ranks <= N - 4).all())
    assert cg.null_error <= 1e-8
    full = whitened_error_statistics(
        _A(), pn.policies.UnitVector(), "inverse", N, 10, torch.Generator().manual_seed(4)
    )
    assert full.rank == 0 and full.z == 0.0 and full.ratio == 1.0
    assert full.null_error <= 1e-8
