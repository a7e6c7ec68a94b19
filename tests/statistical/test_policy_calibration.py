"""Calibration of IterGP's uncertainty per policy, on draws from the GP prior (issue 14 item 7).

Setting: ``N`` inputs and ``T`` test points uniform in ``[0, 1]²``, Matérn-3/2 kernel
(lengthscale 0.3), noise ``σ² = 0.1``, float64. :func:`pnsolve.metrics.prior_draw_calibration`
draws ``f ~ GP(0, k)``, ``y = f(X) + ε`` ``DRAWS`` times from a seeded generator and
standardises the errors of the computed mean against the exact GP mean by
``√comp_var`` (*computational*) and against ``f`` by ``√var`` (*combined*).

* **Non-adaptive policies** (actions independent of ``y``): conditioning on them is
  exact Gaussian inference, so both ``z`` are standard normal: ``|E[z²] − 1|`` and
  ``|coverage₉₅ − 0.95|`` are within ``Z`` standard errors, at a small and a larger
  budget, and ``posterior.calibrated`` is ``True``.
* **CG** (actions are residuals, functions of ``y``) is detected as miscalibrated:
  over-confident after 5 iterations and far too wide after 20. Measured with these
  seeds: computational ``E[z²]`` 1.74 ± 0.08 and coverage₉₅ 0.86 ± 0.01 at 5
  iterations; ``E[z²]`` 1.5e-4 (computational) and 0.49 ± 0.01 (combined) at 20. On
  five input/draw seeds the early over-confidence was 1.35–1.79 (≥ 4.8 standard
  errors) and the late combined ``E[z²]`` 0.49–0.50.
* ``comp_var_scale="residual"`` (a heuristic, *not* claimed calibrated) is checked only
  for what holds robustly: the scale is positive and the variance non-negative, the
  posterior is never marked calibrated, the early over-confidence does not get worse
  (computational ``E[z²]`` 1.74 → 1.23 here) and most of the late over-width goes
  (combined ``E[z²]`` 0.49 → 1.00 at 20 iterations; the computational part then
  overshoots to ≈ 1.9–2.0, which is why nothing claims calibration).

Each check is a two-sided z-test at false-alarm level ``FALSE_ALARM``; with 66 such
checks in this module the family-wise false-alarm level is at most ≈ 66 × 1e-4 = 7e-3
(the seeds are fixed, so the outcome is deterministic).
"""

from __future__ import annotations

import functools
import math

import pytest
import torch

import pnsolve as pn
from pnsolve.metrics import prior_draw_calibration
from pnsolve.testing import statistical_threshold
from pnsolve.testing.calibration import assert_calibrated

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
FALSE_ALARM = 1e-4  # per check (two-sided)
Z = statistical_threshold(FALSE_ALARM)

# study settings: small enough to run in seconds, large enough that CG's effects are
# many standard errors wide
N, T, DRAWS = 150, 40, 100
KERNEL = pn.kernels.Matern(nu=1.5, lengthscale=0.3)
NOISE = 0.1
EARLY, LATE = 5, 20  # iteration budgets
LEVEL = 0.95  # the coverage level checked
INPUT_SEED, DRAW_SEED, POLICY_SEED = 0, 1, 2

NON_ADAPTIVE = {
    "random": lambda: pn.policies.Random(),
    "unit_vector_random": lambda: pn.policies.UnitVector("random"),
    "unit_vector_schur": lambda: pn.policies.UnitVector("schur"),
    "lanczos_random_start": lambda: pn.policies.Lanczos(start="random"),
    "pivoted_cholesky": lambda: pn.policies.PivotedCholeskyActions(),
}
POLICIES = {**NON_ADAPTIVE, "cg": lambda: pn.policies.CG()}


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(INPUT_SEED)
    return torch.rand(N, 2, generator=g, dtype=F64), torch.rand(T, 2, generator=g, dtype=F64)


@functools.cache
def _study(name: str, budget: int, comp_var_scale: str | None = None, precision: str = "full"):
    """``(statistics, posteriors' calibrated flags, residual scales, min comp_var)``.

    Cached: the CG study is shared by the miscalibration and the rescaling tests. The
    draws use the same seed in every study (paired comparisons); the policies' own
    randomness comes from a separate seeded generator.
    """
    X, Xs = _inputs()
    policy_generator = torch.Generator().manual_seed(POLICY_SEED)
    flags, scales, min_comp = set(), [], math.inf

    def posterior(X, y, Xs):
        nonlocal min_comp
        gp = pn.gp.IterGP(
            KERNEL,
            NOISE,
            POLICIES[name](),
            pn.stopping.MaxIterations(budget),
            backend="dense",
            precision=precision,
        )
        with torch.no_grad():
            gp.fit(X, y, generator=policy_generator)
            post = gp.posterior(Xs, comp_var_scale=comp_var_scale)
            if comp_var_scale is not None:  # the split is computed eagerly then
                scales.append(post.comp_var_scale)
                min_comp = min(min_comp, float(post.comp_var.min()))
        flags.add(post.calibrated)
        return post

    stats = prior_draw_calibration(
        KERNEL,
        NOISE,
        X,
        Xs,
        posterior,
        draws=DRAWS,
        generator=torch.Generator().manual_seed(DRAW_SEED),
    )
    return stats, flags, scales, min_comp


def _difference_se(a, b) -> float:
    """Standard error of the difference of two estimates (conservative for paired draws)."""
    return math.hypot(a.mean_z2_se, b.mean_z2_se)


@pytest.mark.statistical
@pytest.mark.parametrize("budget", [EARLY, LATE])
@pytest.mark.parametrize("name", sorted(NON_ADAPTIVE))
def test_non_adaptive_policies_are_calibrated(name, budget):
    stats, flags, _, _ = _study(name, budget)
    assert flags == {True}
    for kind in ("computational", "combined"):
        assert_calibrated(stats[kind], Z, LEVEL)
    # every test point of every draw took part: the computation left uncertainty there
    assert stats["computational"].excluded == 0
    assert stats["computational"].draws == DRAWS


@pytest.mark.statistical
@pytest.mark.parametrize("budget", [EARLY, LATE])
@pytest.mark.parametrize("name", ["lanczos_random_start", "random"])
def test_non_adaptive_policies_stay_calibrated_with_float32_products(name, budget):
    # precision="mixed": products with K̂ in float32, the belief in float64
    stats, flags, _, _ = _study(name, budget, precision="mixed")
    assert flags == {True}
    for kind in ("computational", "combined"):
        assert_calibrated(stats[kind], Z, LEVEL)
    assert stats["computational"].excluded == 0


@pytest.mark.statistical
def test_cg_is_over_confident_early_and_too_wide_later():
    early, early_flags, _, _ = _study("cg", EARLY)
    late, late_flags, _, _ = _study("cg", LATE)
    assert early_flags == late_flags == {False}
    for kind in ("computational", "combined"):
        s = early[kind]
        assert s.mean_z2 - 1.0 > Z * s.mean_z2_se, (kind, s)  # errors larger than claimed
        coverage, se = s.coverage_at(LEVEL)
        assert LEVEL - coverage > Z * se, (kind, coverage, se)
        s = late[kind]
        assert 1.0 - s.mean_z2 > Z * s.mean_z2_se, (kind, s)  # errors far smaller
    coverage, se = late["combined"].coverage_at(LEVEL)
    assert coverage - LEVEL > Z * se, (coverage, se)


@pytest.mark.statistical
def test_residual_rescaling_of_cg_moves_towards_calibration_but_is_not_marked_calibrated():
    for budget in (EARLY, LATE):
        _, flags, scales, min_comp = _study("cg", budget, "residual")
        assert flags == {False}
        assert len(scales) == DRAWS and min(scales) > 0.0
        assert min_comp >= 0.0
    plain, scaled = _study("cg", EARLY)[0], _study("cg", EARLY, "residual")[0]
    # early: no worse than CG's own over-confidence (measured smaller on every input
    # seed tried, 1.74 → 1.23 here, but only by ≈ 2 standard errors on some inputs)
    a, b = plain["computational"], scaled["computational"]
    assert b.mean_z2 - a.mean_z2 <= Z * _difference_se(a, b), (a, b)
    plain, scaled = _study("cg", LATE)[0], _study("cg", LATE, "residual")[0]
    # later: the over-width shrinks (computational E[z²] increases) and the combined
    # E[z²] comes much closer to 1 (0.49 → 1.00)
    a, b = plain["computational"], scaled["computational"]
    assert b.mean_z2 - a.mean_z2 > Z * _difference_se(a, b), (a, b)
    a, b = plain["combined"], scaled["combined"]
    assert abs(a.mean_z2 - 1.0) - abs(b.mean_z2 - 1.0) > Z * _difference_se(a, b), (a, b)
