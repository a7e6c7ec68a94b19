"""MCMC diagnostics: PSRF, split-R̂, bulk ESS, summary.

* Deterministic: the PSRF against a hand computation (coda's ``gelman.diag`` formulas)
  on a 3 × 4 array, identical chains (``√((n−1)/n)``), chains with different means.
* The fallback split-R̂/ESS against ArviZ to rounding (skipped without arviz-stats).
* Statistical, on independent stationary AR(1) chains with coefficient ``φ`` (seeded
  ``torch.Generator``): the bulk ESS is within a stated tolerance of
  ``S (1 − φ)/(1 + φ)``, and the PSRF (with its upper limit) and split-R̂ of these
  well-mixed chains stay below their thresholds with a stated false-alarm level.
* Bad input: wrong shape, one chain, too few draws, NaN/Inf, bad options.
"""

from __future__ import annotations

import importlib
import math
import sys

import pytest
import torch

import pnsolve as pn
from pnsolve.metrics import (
    PSRF_THRESHOLD,
    ess,
    gelman_rubin,
    mcmc_summary,
    psrf_curve,
    split_rhat,
)
from pnsolve.testing import exact_tol, statistical_threshold

F64 = torch.float64
try:  # as the library decides: ArviZ counts when its array interface imports
    importlib.import_module("arviz_stats.base")
    HAS_ARVIZ = True
except ImportError:
    HAS_ARVIZ = False
needs_arviz = pytest.mark.skipif(not HAS_ARVIZ, reason="arviz-stats not installed")
BACKENDS = ["fallback", pytest.param("arviz", marks=needs_arviz)]

# Statistical study settings: independent stationary AR(1) chains, one parameter per φ.
PHIS = (0.0, 0.5, 0.9)
CHAINS, DRAWS = 4, 10_000
FALSE_ALARM = 1e-4  # per check (two-sided for the ESS z-tests)
Z = statistical_threshold(FALSE_ALARM)
# Window of the autocorrelation-time estimate in units of τ (Madras & Sokal recommend
# 4–6 for exponentially decaying autocorrelations; the larger window is the conservative
# side: it widens the tolerance). Geyer's initial sequence stops near 2τ on these chains.
WINDOW_PER_TAU = 6
RHAT_THRESHOLD = 1.01  # Vehtari et al. (2021)
# The PSRF's degrees-of-freedom correction (d+3)/(d+1) and F quantile use d, W.df of the
# order of m·n/τ ≫ 199 here; the bounds below take the values at 199 (conservative).
DF_BOUND = 199


def ar1(phis: tuple[float, ...], chains: int, draws: int, seed: int, dtype=F64) -> torch.Tensor:
    """Stationary AR(1) chains ``x_t = φ x_{t−1} + √(1−φ²) ε_t`` (unit variance).

    Shape ``(chains, draws, len(phis))``; every chain starts from N(0, 1) (stationary).
    """
    g = torch.Generator().manual_seed(seed)
    phi = torch.tensor(phis, dtype=F64)
    eps = torch.randn(chains, draws, len(phis), generator=g, dtype=F64)
    x = torch.empty_like(eps)
    x[:, 0] = eps[:, 0]
    scale = torch.sqrt(1.0 - phi.square())
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + scale * eps[:, t]
    return x.to(dtype)


@pytest.fixture(scope="module")
def mixed() -> torch.Tensor:
    return ar1(PHIS, CHAINS, DRAWS, seed=15)


# ------------------------------------------------------------------- deterministic


def test_psrf_hand_computed():
    # m = 3 chains, n = 4 draws, by hand (exact fractions):
    #   means 3/2, 4, 3; variances 5/3, 20/3, 4/3
    #   W = 29/9, B = 4 var(means) = 19/3, mean of means μ = 17/6
    #   var(W) = var(s²)/3 = 241/81, var(B) = 2B²/2 = 361/9
    #   cov(W, B) = (4/3)(cov(s², x̄²) − 2μ cov(s², x̄)) = 101/81
    #   V = (3/4)W + (4/3)B/4 = 163/36
    #   var(V) = (9 var(W) + (16/9) var(B) + 8 (4/3) cov(W, B))/16 = 8753/1296
    #   d = 2V²/var(V) = 53138/8753, W.df = 2W²/var(W) = 1682/241
    #   R² = 3/4 + (4/3)(1/4)(B/W) = 163/116
    from scipy.stats import f

    x = torch.tensor([[0, 1, 2, 3], [1, 3, 5, 7], [2, 2, 4, 4]], dtype=F64)[..., None]
    d, w_df = 53138 / 8753, 1682 / 241
    fixed, random = 3 / 4, 163 / 116 - 3 / 4
    adj = (d + 3) / (d + 1)
    psrf = math.sqrt(adj * (fixed + random))
    upper = math.sqrt(adj * (fixed + f.ppf(0.975, 2, w_df) * random))
    got, got_upper = gelman_rubin(x)
    assert got.shape == got_upper.shape == (1,)
    tol = exact_tol(F64, x.numel())
    assert float(got[0]) == pytest.approx(psrf, rel=tol)
    assert float(got_upper[0]) == pytest.approx(upper, rel=tol)
    # a lower confidence moves the upper limit down, never the point estimate
    lower_point, lower_upper = gelman_rubin(x, confidence=0.5)
    assert float(lower_point[0]) == pytest.approx(psrf, rel=tol)
    assert psrf < float(lower_upper[0]) < upper


def test_identical_chains_give_the_fixed_part_only():
    # B = 0 and var(W) = var(B) = cov(W, B) = 0: d = ∞, so PSRF = √((n−1)/n), also upper
    n = 50
    chain = torch.randn(n, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    x = chain.expand(3, n, 2)
    psrf, upper = gelman_rubin(x)
    expected = torch.full((2,), math.sqrt((n - 1) / n), dtype=F64)
    torch.testing.assert_close(psrf, expected, rtol=exact_tol(F64, x.numel()), atol=0)
    torch.testing.assert_close(upper, expected, rtol=exact_tol(F64, x.numel()), atol=0)


def test_chains_with_different_means_are_flagged():
    g = torch.Generator().manual_seed(1)
    offsets = torch.tensor([0.0, 10.0, 20.0], dtype=F64)[:, None, None]
    x = torch.randn(3, 200, 2, generator=g, dtype=F64) + offsets
    psrf, upper = gelman_rubin(x)
    # R² ≈ 1 + (1 + 1/m) var(offsets)/σ² = 1 + (4/3)·100: PSRF ≈ 11.6
    assert bool((psrf > 10).all())
    assert bool((upper >= psrf).all())
    assert bool((split_rhat(x, backend="fallback") > PSRF_THRESHOLD).all())


def test_constant_chains():
    x = torch.zeros(3, 10, 2, dtype=F64)
    x[1, :, 0] = 1.0  # parameter 0: stuck at different values; parameter 1: all equal
    psrf, upper = gelman_rubin(x)
    assert math.isinf(psrf[0]) and math.isinf(upper[0])
    assert math.isnan(psrf[1]) and math.isnan(upper[1])
    assert float(ess(x[:, :, 1:], backend="fallback")[0]) == x[:, :, 0].numel()


def test_dtype_device_and_input_kinds_follow_the_samples():
    x = ar1((0.3, 0.6), 3, 40, seed=2)
    psrf, upper = gelman_rubin(x)
    for y, dtype in ((x.float(), torch.float32), (x.numpy(), F64), (x.tolist(), F64)):
        p, u = gelman_rubin(y)
        assert p.dtype == u.dtype == dtype
        tol = exact_tol(dtype, x.numel())
        # NumPy and list inputs are host data: their results are on the CPU
        torch.testing.assert_close(p.to(F64).cpu(), psrf.cpu(), rtol=tol, atol=0)
        torch.testing.assert_close(u.to(F64).cpu(), upper.cpu(), rtol=tol, atol=0)
    ints = torch.arange(24).reshape(2, 6, 2) % 5
    assert gelman_rubin(ints)[0].dtype == torch.get_default_dtype()
    assert split_rhat(x.float(), backend="fallback").dtype == torch.float32
    assert ess(x.float(), backend="fallback").dtype == torch.float32


def test_psrf_curve_is_gelman_rubin_on_prefixes():
    x = ar1((0.2, 0.8), 3, 60, seed=3)
    steps = [4, 10, 33, 60]
    psrf, upper = psrf_curve(x, steps)
    assert psrf.shape == upper.shape == (len(steps), 2)
    for i, k in enumerate(steps):
        p, u = gelman_rubin(x[:, :k])
        torch.testing.assert_close(psrf[i], p, rtol=0, atol=0)
        torch.testing.assert_close(upper[i], u, rtol=0, atol=0)
    assert bool((upper >= psrf).all())
    psrf_t, _ = psrf_curve(x, torch.tensor(steps))
    torch.testing.assert_close(psrf_t, psrf, rtol=0, atol=0)


def test_mcmc_summary_rows():
    x = ar1((0.1, 0.7), 3, 80, seed=4)
    rows = mcmc_summary(x, ["log_tau", "log_lambda"], backend="fallback")
    assert [r.name for r in rows] == ["log_tau", "log_lambda"]
    psrf, upper = gelman_rubin(x)
    rhat = split_rhat(x, backend="fallback")
    n_eff = ess(x, backend="fallback")
    pooled = x.reshape(-1, 2)
    for j, r in enumerate(rows):
        assert r.mean == pytest.approx(float(pooled[:, j].mean()), rel=exact_tol(F64, 240))
        assert r.sd == pytest.approx(float(pooled[:, j].std()), rel=exact_tol(F64, 240))
        assert (r.psrf, r.psrf_upper) == (float(psrf[j]), float(upper[j]))
        assert (r.split_rhat, r.ess) == (float(rhat[j]), float(n_eff[j]))
    assert [r.name for r in mcmc_summary(x, backend="fallback")] == ["θ0", "θ1"]
    single = mcmc_summary(x[:1], ["a", "b"], backend="fallback")
    assert all(math.isnan(r.psrf) and math.isnan(r.split_rhat) for r in single)
    assert all(math.isfinite(r.ess) and r.ess > 0 for r in single)


# ----------------------------------------------------------- fallback against ArviZ


@needs_arviz
@pytest.mark.parametrize(
    ("chains", "draws", "seed"),
    [(2, 4, 0), (2, 5, 1), (3, 7, 2), (4, 8, 3), (2, 9, 4), (4, 11, 5), (3, 333, 6), (4, 1000, 7)],
)
def test_fallback_matches_arviz(chains, draws, seed):
    # φ < 0 (antithetic: ESS > S, the cap), φ = 0.95 (long initial sequence), small
    # draws (no Geyer pair beyond the first), odd lengths (the split drops a draw)
    x = ar1((0.0, 0.5, 0.95, -0.3, -0.8), chains, draws, seed)
    tol = exact_tol(F64, x[..., 0].numel())
    for fn in (split_rhat, ess):
        torch.testing.assert_close(
            fn(x, backend="fallback"), fn(x, backend="arviz"), rtol=tol, atol=0
        )


@needs_arviz
def test_fallback_matches_arviz_with_ties():
    # integer draws: many ties, which the rank normalisation averages
    g = torch.Generator().manual_seed(8)
    x = torch.randint(0, 4, (3, 40, 2), generator=g).to(F64)
    tol = exact_tol(F64, x[..., 0].numel())
    for fn in (split_rhat, ess):
        torch.testing.assert_close(
            fn(x, backend="fallback"), fn(x, backend="arviz"), rtol=tol, atol=0
        )


def test_auto_falls_back_without_arviz(monkeypatch):
    x = ar1((0.4,), 2, 30, seed=9)
    expected = ess(x, backend="fallback")
    monkeypatch.setitem(sys.modules, "arviz_stats.base", None)  # import now fails
    torch.testing.assert_close(ess(x), expected, rtol=exact_tol(F64, 60), atol=0)
    with pytest.raises(ImportError, match=r"pnsolve\[mcmc\]"):
        split_rhat(x, backend="arviz")


# ---------------------------------------------------------------------- statistical


@pytest.mark.statistical
@pytest.mark.parametrize("backend", BACKENDS)
def test_bulk_ess_of_ar1_chains(mixed, backend):
    # Target: S (1 − φ)/(1 + φ) = S/τ with τ = (1 + φ)/(1 − φ). Tolerance: the relative
    # sd of a windowed estimate of τ, √(2(2M + 1)/S) (Madras & Sokal 1988) with window
    # M = 6τ, times the two-sided z of FALSE_ALARM (for the ESS, the relative error of
    # S/τ̂ to first order): 0.099, 0.167, 0.416 for φ = 0, 0.5, 0.9. Measured on this
    # seed: −0.051, −0.067, −0.047 (z ≈ −2.0, −1.5, −0.4 against that sd, the same for
    # both backends); over 40 seeds the relative errors had sd 0.014, 0.026, 0.061 (the
    # formula's 0.025, 0.043, 0.107 is conservative) and means −0.007, −0.011, −0.031.
    S = CHAINS * DRAWS
    got = ess(mixed, backend=backend)
    for j, phi in enumerate(PHIS):
        tau = (1 + phi) / (1 - phi)
        sd = math.sqrt(2 * (2 * WINDOW_PER_TAU * tau + 1) / S)
        assert abs(float(got[j]) / (S / tau) - 1) <= Z * sd, (phi, float(got[j]), S / tau)


def _exceedance(
    threshold: float, chains: int, draws: int, tau: float, *, adj: float = 1.0, q: float = 1.0
) -> float:
    """Bound on ``P(√(adj · R²) > threshold)`` for independent stationary chains.

    Chain means are independent with variance ``σ²τ/n``, so ``B/σ² ≈ τ X`` with
    ``X ~ χ²_{m−1}/(m−1)`` and ``W ≈ σ²``: ``R² ≈ (n−1)/n + q (1 + 1/m)(τ/n) X``, with
    ``q = 1`` for a point estimate and the F quantile for the PSRF's upper limit.
    """
    from scipy.stats import chi2

    m, n = chains, draws
    x_star = (threshold**2 / adj - (n - 1) / n) * m * n / ((m + 1) * tau * q)
    return float(chi2.sf((m - 1) * x_star, m - 1))


@pytest.mark.statistical
def test_psrf_of_well_mixed_chains_is_below_threshold(mixed):
    # Every parameter's PSRF upper limit (hence its point estimate) < 1.1, and split-R̂
    # (2m halves of n/2 draws; the normal scores keep τ, the folded tail has τ ≤ this)
    # < 1.01. The bounds of _exceedance are the false-alarm levels: each below
    # FALSE_ALARM (largest: split-R̂ at φ = 0.9, 2.4e-5; the PSRF's at most 6e-17), so the
    # module's family-wise level is ≤ 3 × 1e-4 (ESS) + 3e-5. Measured PSRF ≤ 1.0012
    # (upper ≤ 1.0035), split-R̂ ≤ 1.0018.
    from scipy.stats import f

    # the PSRF's correction (d+3)/(d+1) and F quantile, at DF_BOUND degrees of freedom
    adj = (DF_BOUND + 3) / (DF_BOUND + 1)
    q = f.ppf(0.975, CHAINS - 1, DF_BOUND)
    psrf, upper = gelman_rubin(mixed)
    rhat = split_rhat(mixed)
    for j, phi in enumerate(PHIS):
        tau = (1 + phi) / (1 - phi)
        assert _exceedance(PSRF_THRESHOLD, CHAINS, DRAWS, tau, adj=adj, q=q) < FALSE_ALARM
        assert _exceedance(RHAT_THRESHOLD, 2 * CHAINS, DRAWS // 2, tau) < FALSE_ALARM
        assert float(psrf[j]) <= float(upper[j]) < PSRF_THRESHOLD, phi
        assert float(rhat[j]) < RHAT_THRESHOLD, phi


# ------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("samples", "match"),
    [
        (torch.zeros(3, 10), r"shape \(chains, draws, parameters\)"),
        (torch.zeros(3, 10, 0), r"shape \(chains, draws, parameters\)"),
        (torch.zeros(1, 10, 2), "1 chain"),
        (torch.zeros(2, 3, 2), "3 draws"),
        (torch.tensor([[[0.0], [1.0], [math.nan], [2.0]]] * 2), "samples contains NaN"),
        (torch.tensor([[[0.0], [1.0], [math.inf], [2.0]]] * 2), "samples contains Inf"),
    ],
)
def test_bad_samples_raise_value_error_naming_samples(samples, match):
    for fn in (gelman_rubin, split_rhat, lambda s: psrf_curve(s, [4])):
        with pytest.raises(ValueError, match=match):
            fn(samples)
    if samples.ndim == 3 and samples.shape[0] == 1:  # one chain is enough for these
        assert ess(samples).shape == (samples.shape[2],)
        return
    for fn in (ess, mcmc_summary):
        with pytest.raises(ValueError, match=match):
            fn(samples)


def test_bad_samples_types():
    with pytest.raises(TypeError, match="samples"):
        gelman_rubin([[["a"] * 2] * 4] * 2)
    with pytest.raises(TypeError, match="samples"):
        ess(torch.zeros(2, 4, 1, dtype=torch.complex64))
    with pytest.raises(TypeError, match="samples"):
        ess(torch.zeros(2, 4, 1, dtype=torch.bool))


def test_bad_options():
    x = ar1((0.5,), 2, 20, seed=10)
    with pytest.raises(ValueError, match="backend"):
        ess(x, backend="stan")
    with pytest.raises(ValueError, match="confidence"):
        gelman_rubin(x, confidence=1.0)
    with pytest.raises(ValueError, match="steps"):
        psrf_curve(x, [3])
    with pytest.raises(ValueError, match="steps"):
        psrf_curve(x, [21])
    with pytest.raises(ValueError, match="steps"):
        psrf_curve(x, [])
    with pytest.raises(TypeError, match="steps"):
        psrf_curve(x, [4.5])
    with pytest.raises(ValueError, match="names"):
        mcmc_summary(x, ["a", "b"])
    with pytest.raises(ValueError, match="names"):
        mcmc_summary(x, "a")


def test_ess_accepts_one_chain():
    x = ar1((0.0,), 1, 400, seed=11)
    assert 0 < float(ess(x, backend="fallback")[0]) <= 400 * math.log10(400)
    assert pn.metrics.ess is ess
