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


@pytest.mark.parametrize("prior", ["inverse", SIGMA2])
@pytest.mark.parametrize("name", sorted(NON_ADAPTIVE))
def test_non_adaptive_policies_are_calibrated(name, prior):
    result = whitened_error_statistics(
        _A(), NON_ADAPTIVE[name](), prior, ITERATIONS, DRAWS, torch.Generator().manual_seed(11)
    )
    assert result.rank == N - ITERATIONS
    assert abs(result.z) <= statistical_threshold(FALSE_ALARM), (result.mean, result.rank)


def test_cg_with_inverse_prior_is_detected_as_miscalibrated():
    result = whitened_error_statistics(
        _A(), pn.policies.CG(), "inverse", ITERATIONS, DRAWS, torch.Generator().manual_seed(11)
    )
    assert result.rank == N - ITERATIONS
    # far beyond the threshold, and on the under-confident side (errors smaller than
    # the covariance claims)
    assert result.z < -statistical_threshold(FALSE_ALARM)
    assert result.ratio < 1
