"""Public calibration statistics of GP posteriors on prior draws."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

import pnsolve as pn
from pnsolve.metrics import prior_draw_calibration, z_statistics
from pnsolve.testing import statistical_threshold

F64 = torch.float64
FALSE_ALARM = 1e-3  # per check; a test makes at most a few
Z = statistical_threshold(FALSE_ALARM)


def _inputs(n=80, t=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 2, generator=g, dtype=F64), torch.rand(t, 2, generator=g, dtype=F64)


KERNEL = pn.kernels.Matern(nu=1.5, lengthscale=0.3)
NOISE = 0.1


@dataclass
class _Scaled:
    mean: torch.Tensor
    var: torch.Tensor


def test_z_statistics_hand_computed():
    # no |z| on a level's boundary (±1, ±2): the quantiles are computed, not exact, and
    # a GPU's erfinv put the one-sigma quantile a rounding below 1.0
    z = torch.tensor([[0.0, 0.9, -1.9, float("nan")], [3.0, 0.5, 0.5, 0.5]], dtype=F64)
    mean_z2, coverage = z_statistics(z, levels=(0.6826894921370859, 0.9544997361036416))
    expected = torch.tensor([(0.81 + 3.61) / 3, (9 + 0.75) / 4], dtype=F64)
    torch.testing.assert_close(mean_z2, expected)
    # |z| ≤ 1 and |z| ≤ 2 (the one- and two-sigma levels); NaN excluded from the count
    torch.testing.assert_close(coverage, torch.tensor([[2 / 3, 1.0], [3 / 4, 3 / 4]], dtype=F64))


@pytest.mark.statistical
def test_the_exact_gp_is_calibrated_in_its_combined_variance():
    X, Xs = _inputs()

    def exact(X, y, Xs):
        with torch.no_grad():
            return pn.gp.ExactGP(KERNEL, noise=NOISE).fit(X, y).posterior(Xs)

    stats = prior_draw_calibration(
        KERNEL, NOISE, X, Xs, exact, draws=60, generator=torch.Generator().manual_seed(1)
    )
    comb = stats["combined"]
    assert abs(comb.mean_z2 - 1.0) <= Z * comb.mean_z2_se, comb
    cov, se = comb.coverage_at(0.95)
    assert abs(cov - 0.95) <= Z * se + 1e-12, (cov, se)
    # no computation left: every point's computational variance is at rounding level
    assert stats["computational"].excluded == 60 * Xs.shape[0]


@pytest.mark.statistical
def test_an_inflated_variance_is_detected_as_too_wide():
    X, Xs = _inputs()

    def wide(X, y, Xs):
        with torch.no_grad():
            post = pn.gp.ExactGP(KERNEL, noise=NOISE).fit(X, y).posterior(Xs)
        return _Scaled(post.mean, 4.0 * post.var)

    stats = prior_draw_calibration(
        KERNEL, NOISE, X, Xs, wide, draws=30, generator=torch.Generator().manual_seed(2)
    )
    comb = stats["combined"]
    assert comb.mean_z2 < 1.0 - Z * comb.mean_z2_se  # E[z²] = 1/4 here
    assert comb.coverage_at(0.5)[0] > 0.5


@pytest.mark.statistical
@pytest.mark.parametrize("iterations", [5, 20])
def test_a_non_adaptive_itergp_is_calibrated_in_its_computational_variance(iterations):
    # Random actions do not depend on y: conditioning on them is exact inference, so the
    # computed mean's error against the exact GP mean is N(0, comp_var) on prior draws.
    X, Xs = _inputs()
    g = torch.Generator().manual_seed(3)  # the policy's randomness, across draws

    def itergp(X, y, Xs):
        gp = pn.gp.IterGP(
            KERNEL, NOISE, pn.policies.Random(), pn.stopping.MaxIterations(iterations)
        )
        with torch.no_grad():
            return gp.fit(X, y, generator=g).posterior(Xs)

    stats = prior_draw_calibration(
        KERNEL, NOISE, X, Xs, itergp, draws=60, generator=torch.Generator().manual_seed(4)
    )
    comp, comb = stats["computational"], stats["combined"]
    assert abs(comp.mean_z2 - 1.0) <= Z * comp.mean_z2_se, comp
    assert abs(comb.mean_z2 - 1.0) <= Z * comb.mean_z2_se, comb
    assert comp.excluded == 0 and comp.draws == 60
    cov, se = comp.coverage_at(0.95)
    assert abs(cov - 0.95) <= Z * se + 1e-12, (cov, se)


def test_bad_arguments_are_refused():
    X, Xs = _inputs(10, 5)

    def post(X, y, Xs):
        return pn.gp.ExactGP(KERNEL, noise=NOISE).fit(X, y).posterior(Xs)

    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="draws must be at least 2"):
        prior_draw_calibration(KERNEL, NOISE, X, Xs, post, draws=1, generator=g)
    with pytest.raises(TypeError, match="generator"):
        prior_draw_calibration(KERNEL, NOISE, X, Xs, post, draws=3, generator=None)
    with pytest.raises(ValueError, match="noise"):
        prior_draw_calibration(KERNEL, -1.0, X, Xs, post, draws=3, generator=g)
    with pytest.raises(ValueError, match="levels"):
        z_statistics(torch.zeros(2, 3, dtype=F64), levels=(1.5,))
    stats = prior_draw_calibration(KERNEL, NOISE, X, Xs, post, draws=3, generator=g)
    with pytest.raises(ValueError, match=r"level 0\.42"):
        stats["combined"].coverage_at(0.42)
    assert math.isfinite(stats["combined"].mean_z2)


def test_coverage_plot_is_written(tmp_path):
    X, Xs = _inputs(20, 10)

    def post(X, y, Xs):
        return pn.gp.ExactGP(KERNEL, noise=NOISE).fit(X, y).posterior(Xs)

    stats = prior_draw_calibration(
        KERNEL, NOISE, X, Xs, post, draws=4, generator=torch.Generator().manual_seed(5)
    )
    out = pn.plotting.plot_coverage({"exact GP": stats["combined"]}, tmp_path / "c.png")
    assert out.exists() and out.stat().st_size > 1000


def test_from_z_pools_per_draw_means_and_counts_excluded_points():
    z = torch.tensor([[0.0, 1.0, -2.0, float("nan")], [3.0, 0.5, 0.5, 0.5]], dtype=F64)
    stats = pn.metrics.CalibrationStatistics.from_z(z, levels=(0.5,))
    per_draw = torch.tensor([5 / 3, (9 + 0.75) / 4], dtype=F64)
    assert stats.mean_z2 == pytest.approx(float(per_draw.mean()))
    assert stats.mean_z2_se == pytest.approx(float(per_draw.std() / math.sqrt(2)))
    assert stats.draws == 2 and stats.excluded == 1
    with pytest.raises(ValueError, match="at least 2 draws"):
        pn.metrics.CalibrationStatistics.from_z(z[:1])


def test_fully_excluded_draws_are_left_out_and_nothing_left_is_nan():
    nan = float("nan")
    z = torch.tensor([[1.0, nan], [nan, nan], [2.0, 0.0], [0.0, 0.0]], dtype=F64)
    stats = pn.metrics.CalibrationStatistics.from_z(z, levels=(0.5,))
    assert stats.draws == 3 and stats.excluded == 3
    assert stats.mean_z2 == pytest.approx((1.0 + 2.0 + 0.0) / 3)
    none = pn.metrics.CalibrationStatistics.from_z(torch.full((3, 2), nan, dtype=F64))
    assert none.draws == 0 and math.isnan(none.mean_z2) and math.isnan(none.mean_z2_se)
    assert bool(torch.isnan(none.coverage).all())


def test_assert_calibrated_passes_within_and_fails_outside_the_threshold():
    from pnsolve.testing.calibration import assert_calibrated

    def stats(mean, cov):
        levels = torch.tensor([0.95], dtype=F64)
        se = torch.tensor([0.01], dtype=F64)
        return pn.metrics.CalibrationStatistics(
            mean, 0.05, levels, torch.tensor([cov], dtype=F64), se, draws=100
        )

    assert_calibrated(stats(1.1, 0.96), Z)
    with pytest.raises(AssertionError, match="E\\[z²\\]"):
        assert_calibrated(stats(1.0 + 1.01 * Z * 0.05, 0.95), Z)
    with pytest.raises(AssertionError, match="coverage"):
        assert_calibrated(stats(1.0, 0.95 - 1.01 * Z * 0.01), Z)
