"""Pathwise posterior sampling (Matheron's rule): exact algebra, distribution, one solve."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
import pnsolve.gp.pathwise as pathwise
from pnsolve.gp.mll_estimators import PathwiseEstimator
from pnsolve.gp.pathwise import PathwiseDraws, PathwiseSamples, pathwise_update, sample_posterior
from pnsolve.kernels import RandomFourierFeatures
from pnsolve.testing import moment_threshold, moment_z_scores
from pnsolve.testing.device import suite_device
from pnsolve.testing.tolerances import (
    exact_tol,
    iterative_tol,
)

F64 = torch.float64
FALSE_ALARM = 1e-3  # family-wise, per statistical test (Bonferroni inside)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _problem(n=20, d=2, t=5, seed=0, dtype=F64):
    """Uniform training inputs in [0, 1]^d, test inputs in [-0.25, 1.25]^d, smooth targets."""
    g = _gen(seed)
    X = torch.rand(n, d, generator=g, dtype=dtype)
    Xs = 1.5 * torch.rand(t, d, generator=g, dtype=dtype) - 0.25
    y = torch.sin(3 * X.sum(-1)) + 0.1 * torch.randn(n, generator=g, dtype=dtype)
    return X, y, Xs


def _kernel(dtype=F64):
    return pn.kernels.RBF(lengthscale=torch.tensor(0.4, dtype=dtype), outputscale=1.3)


def _dense_reference(kernel, X, y, noise, mean, samples: PathwiseSamples, Xs):
    """``μ + f(Xs) + K(Xs, X) K̂⁻¹ (y − μ − f(X) − ε)`` by Cholesky, same draws."""
    with torch.no_grad():
        Khat = kernel(X) + noise * torch.eye(X.shape[0], dtype=X.dtype)
        L = torch.linalg.cholesky(Khat)
        w, eps = samples.prior_weights, samples.noise_sample
        B = (y - mean)[:, None] - samples.features(X) @ w - eps
        V = torch.cholesky_solve(B, L)
        F = mean + samples.features(Xs) @ w + kernel(Xs, X) @ V
        return F, V, torch.linalg.cond(Khat).item()


# --------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("mean", [0.0, 0.7])
def test_matches_dense_matheron_formula(mean):
    # Given the stored prior draw w and noise draw ε, the sample is a deterministic function
    # of them. CG stops at ‖r‖ ≤ rtol‖b‖ (rtol = iterative_tol, plus rounding in the
    # true-residual check), so ‖v − v*‖ ≤ κ(K̂)(rtol + exact_tol)‖v*‖ per column, and the
    # evaluated sample differs from the dense formula by at most ‖K(Xs, X)‖₂ times that.
    X, y, Xs = _problem()
    k, noise = _kernel(), 0.05
    samples = sample_posterior(k, X, y, noise, 7, generator=_gen(1), num_features=300, mean=mean)
    assert samples.solve_info.success
    F_ref, V_ref, cond = _dense_reference(k, X, y, noise, mean, samples, Xs)
    rel = cond * (iterative_tol(F64) + exact_tol(F64, X.shape[0]))
    v_err = torch.linalg.norm(samples.weights - V_ref, dim=0)
    assert bool((v_err <= rel * torch.linalg.norm(V_ref, dim=0)).all()), v_err
    with torch.no_grad():
        F = samples(Xs)
        K_norm = torch.linalg.matrix_norm(k(Xs, X), ord=2)
        scale = F_ref.abs().max()
    assert F.shape == (5, 7) and F.dtype == F64
    bound = K_norm * v_err + exact_tol(F64, 300) * scale
    assert bool(((F - F_ref).abs() <= bound).all())


def test_custom_dense_solver_is_exact():
    # A Cholesky solver plugged in gives the dense formula up to a backward-stable solve:
    # relative forward error O(κ eps).
    X, y, Xs = _problem(d=1)
    k, noise = pn.kernels.Matern(1.5, lengthscale=0.3), 0.1

    def cholesky_solver(A, B):
        return torch.cholesky_solve(B, torch.linalg.cholesky(A.to_dense()))

    samples = sample_posterior(k, X, y, noise, 4, generator=_gen(2), solver=cholesky_solver)
    assert samples.solve_info is None
    F_ref, _, cond = _dense_reference(k, X, y, noise, 0.0, samples, Xs)
    with torch.no_grad():
        F = samples(Xs)
    tol = cond * exact_tol(F64, X.shape[0]) * F_ref.abs().max()
    torch.testing.assert_close(F, F_ref, rtol=0.0, atol=tol.item())


def test_float32_follows_dtype_and_matches_float64_formula():
    X, y, Xs = _problem(dtype=torch.float32)
    k, noise = _kernel(torch.float32), 0.05
    samples = sample_posterior(k, X, y, noise, 3, generator=_gen(3), num_features=100)
    with torch.no_grad():
        F = samples(Xs)
    assert F.dtype == torch.float32 and samples.weights.dtype == torch.float32
    # reference in float64 from the same (float32) draws
    k64 = _kernel(F64)

    draws64 = PathwiseDraws(*(t.double() for t in vars(samples.draws).values()))

    class _Cast:
        prior_weights = samples.prior_weights.double()
        noise_sample = samples.noise_sample.double()

        @staticmethod
        def features(Z):
            return draws64.features(k64, Z)

    F_ref, _, cond = _dense_reference(k64, X.double(), y.double(), noise, 0.0, _Cast, Xs.double())
    f32 = torch.float32
    rel = cond * (iterative_tol(f32) + exact_tol(f32, X.shape[0])) + exact_tol(f32, 100)
    assert float((F.double() - F_ref).abs().max()) <= rel * float(F_ref.abs().max())


# ------------------------------------------------------------------------- statistics
def _sampling_distribution(samples: PathwiseSamples, y, noise, Xs):
    """Exact law of the samples at ``Xs`` given the frozen RFF frequencies.

    ``F = μ + Φ_* w + A (y − μ − Φ_X w − ε)`` with ``A = K_*X K̂⁻¹``, ``w ~ N(0, I)``,
    ``ε ~ N(0, σ²I)`` is Gaussian with mean ``μ + A(y − μ)`` and covariance
    ``(Φ_* − AΦ_X)(Φ_* − AΦ_X)ᵀ + σ² AAᵀ``. For ``Φ Φᵀ = K`` this is the exact GP posterior;
    here the prior covariance is the RFF kernel, which makes the test exact for any ``m``.
    """
    k, X, mu = samples.kernel, samples.X, samples.mean
    with torch.no_grad():
        Khat = k(X) + noise * torch.eye(X.shape[0], dtype=X.dtype)
        A = torch.linalg.solve(Khat, k(X, Xs)).mT
        D = samples.features(Xs) - A @ samples.features(X)
        return mu + A @ (y - mu), D @ D.mT + noise * A @ A.mT


@pytest.mark.statistical
@pytest.mark.parametrize(
    "kernel,d", [(pn.kernels.RBF(0.4, outputscale=1.3), 2), (pn.kernels.Matern(2.5, 0.3), 1)]
)
def test_mean_and_covariance_match_posterior(kernel, d):
    # t means and t(t+1)/2 covariance entries; Bonferroni over all of them at FALSE_ALARM.
    X, y, Xs = _problem(d=d)
    noise, mu, s = 0.05, 0.3, 4000
    samples = sample_posterior(
        kernel, X, y, noise, s, generator=_gen(10), num_features=256, mean=mu
    )
    with torch.no_grad():
        F = samples(Xs)
    mean, cov = _sampling_distribution(samples, y, noise, Xs)
    t = Xs.shape[0]
    z = moment_threshold(t, FALSE_ALARM)
    zm, zc = moment_z_scores(F, mean, cov)
    assert zm <= z, (zm, z)
    assert zc <= z, (zc, z)
    # power: the same test rejects samples that forget the noise draw ε (their covariance
    # lacks σ² A Aᵀ), so it is not vacuous.
    with torch.no_grad():
        wrong = F + samples.kernel(Xs, X) @ torch.linalg.solve(
            kernel(X) + noise * torch.eye(X.shape[0], dtype=F64), samples.noise_sample
        )
    assert max(moment_z_scores(wrong, mean, cov)) > z


def test_sampling_distribution_approaches_exact_posterior_with_many_features():
    # Sanity link to the exact GP: the RFF covariance error is O(1/√m) (Monte Carlo over
    # m features), so with m = 2^14 the covariance entries agree to a few outputscale/√m
    # (measured: at most 1.3 outputscale/√m over 6 seeds; the bound 8 leaves a wide margin).
    X, y, Xs = _problem()
    k, noise = _kernel(), 0.05
    m = 2**14
    samples = sample_posterior(k, X, y, noise, 1, generator=_gen(4), num_features=m)
    mean, cov = _sampling_distribution(samples, y, noise, Xs)
    with torch.no_grad():
        Khat = k(X) + noise * torch.eye(X.shape[0], dtype=F64)
        Ksx = k(Xs, X)
        exact_mean = Ksx @ torch.linalg.solve(Khat, y)
        exact_cov = k(Xs) - Ksx @ torch.linalg.solve(Khat, Ksx.mT)
    torch.testing.assert_close(mean, exact_mean, rtol=0.0, atol=exact_tol(F64, 20))
    assert float((cov - exact_cov).abs().max()) <= 8 * k.outputscale.item() / math.sqrt(m)


# ----------------------------------------------------------------------- one solve only
def test_one_batched_solve_and_no_solves_at_evaluation(monkeypatch):
    X, y, Xs = _problem()
    calls = []

    def counting_solver(A, B):
        calls.append(tuple(B.shape))
        return pn.cg(A, B, rtol=1e-10)

    samples = sample_posterior(_kernel(), X, y, 0.05, 6, generator=_gen(5), solver=counting_solver)
    assert calls == [(20, 6)]
    with torch.no_grad():
        samples(Xs), samples(X), samples(Xs[:1]), samples.prior(Xs)
    assert calls == [(20, 6)]
    # the default solver: pn.cg is called exactly once too
    cg_calls = []
    real_cg = pathwise.cg
    monkeypatch.setattr(
        pathwise, "cg", lambda A, B, **kw: cg_calls.append(B.shape) or real_cg(A, B, **kw)
    )
    samples = sample_posterior(_kernel(), X, y, 0.05, 6, generator=_gen(5))
    with torch.no_grad():
        samples(Xs), samples(X)
    assert cg_calls == [torch.Size([20, 6])]


def test_blockwise_and_matrix_free_evaluation_agree(monkeypatch):
    X, y, Xs = _problem(t=40)
    samples = sample_posterior(_kernel(), X, y, 0.05, 3, generator=_gen(6), num_features=64)
    with torch.no_grad():
        dense = samples(Xs)
        monkeypatch.setattr(pathwise, "_DENSE_ENTRIES", 100)  # t·n = 800 → linop, 1-row blocks
        blocked = samples(Xs)
    torch.testing.assert_close(blocked, dense, rtol=exact_tol(F64, 64), atol=0.0)


def test_gradient_reaches_test_inputs():
    X, y, Xs = _problem()
    samples = sample_posterior(_kernel(), X, y, 0.05, 2, generator=_gen(7), num_features=32)
    Xs = Xs.clone().requires_grad_(True)
    samples(Xs).sum().backward()
    assert Xs.grad is not None and bool(torch.isfinite(Xs.grad).all())


# ------------------------------------------------------------------- reproducibility
def test_reproducible_with_generator_and_documented_draw_order():
    X, y, Xs = _problem()
    k, noise, m, s = _kernel(), 0.05, 50, 4
    a = sample_posterior(k, X, y, noise, s, generator=_gen(8), num_features=m)
    b = sample_posterior(k, X, y, noise, s, generator=_gen(8), num_features=m)
    c = sample_posterior(k, X, y, noise, s, generator=_gen(9), num_features=m)
    with torch.no_grad():
        assert torch.equal(a(Xs), b(Xs))
        assert not torch.allclose(a(Xs), c(Xs))
    # draw order: RFF frequencies and phases, then w (m, s), then ε (n, s)
    g = _gen(8)
    rff = RandomFourierFeatures(k, m, 2, generator=g, dtype=F64, device=suite_device())
    w = rff.weights(s, generator=g, dtype=F64)
    eps = math.sqrt(noise) * torch.randn(20, s, generator=g, dtype=F64)
    assert torch.equal(rff.base_frequencies, a.draws.base_frequencies)
    assert torch.equal(rff.phases, a.draws.phases)
    assert torch.equal(w, a.prior_weights)
    assert torch.equal(eps, a.noise_sample)
    with torch.no_grad():  # the draws' features are the RFF module's
        assert torch.equal(a.features(Xs), rff.features(Xs))


# ------------------------------------------------- one sampler for sampling and estimation
def test_estimator_draws_are_pathwise_draws():
    # PathwiseEstimator draws the same randomness, in the same order, as PathwiseDraws.draw.
    X, y, _ = _problem()
    k, m, s = _kernel(), 40, 3
    est = PathwiseEstimator(s, m, generator=_gen(12))
    est.targets(k, X, 0.05, y)
    mine = PathwiseDraws.draw(k, m, s, X, _gen(12))
    for field in ("base_frequencies", "phases", "feature_weights", "noise_weights"):
        assert torch.equal(getattr(est.draws, field), getattr(mine, field)), field
    assert mine.num_samples == s


def test_estimator_samples_are_the_pathwise_samples():
    # The estimator's solutions [v_y, ẑ] give V = v_y − ẑ = K̂⁻¹(y − μ − f(X) − ε): the
    # weights of sample_posterior with the same draws, and the same functions (eq. 16).
    X, y, Xs = _problem()
    k, noise, m, s = _kernel(), 0.05, 40, 3
    mu = torch.tensor(0.4, dtype=F64)  # (a Python float mean is rounded to float32 first)

    def cholesky_solver(A, B):
        return torch.cholesky_solve(B, torch.linalg.cholesky(A.to_dense()))

    samples = sample_posterior(
        k, X, y, noise, s, generator=_gen(13), num_features=m, mean=mu, solver=cholesky_solver
    )
    est = PathwiseEstimator(s, m, generator=_gen(13))
    with torch.no_grad():
        Khat = k(X) + noise * torch.eye(20, dtype=F64)
        B = est.targets(k, X, noise, y - mu)
        V = cholesky_solver(pn.linops.as_linop(Khat), B)
        F_est = mu + est.posterior_samples(k, X, noise, y - mu, V, Xs)
        F = samples(Xs)
        # backward-stable solves: errors O(κ eps ‖V‖) for each of v_y and ẑ (their
        # difference cancels, so the bound is relative to ‖V‖, not to v_y − ẑ)
        tol = float(torch.linalg.cond(Khat)) * exact_tol(F64, 20) * float(V.abs().max())
        torch.testing.assert_close(V[:, :1] - V[:, 1:], samples.weights, rtol=0, atol=tol)
        row_sum = float(k(Xs, X).abs().sum(1).max())
        torch.testing.assert_close(F_est, F, rtol=0, atol=tol * row_sum + exact_tol(F64, m))
        # and the estimator's prior draws are the shared ones
        assert torch.equal(est.prior_samples(k, Xs), samples.draws.prior(k, Xs))
        ref = pathwise_update(k, Xs, X, samples.weights)
        assert torch.equal(ref, k(Xs, X) @ samples.weights)


def test_samples_object_is_frozen():
    X, y, _ = _problem()
    samples = sample_posterior(_kernel(), X, y, 0.05, 2, generator=_gen(0), num_features=8)
    assert samples.num_samples == 2 and samples.weights.shape == (20, 2)
    with pytest.raises(AttributeError):
        samples.weights = torch.zeros(20, 2, dtype=F64)


# ---------------------------------------------------------------------------- bad input
def _call(**over):
    X, y, _ = _problem()
    args = dict(kernel=_kernel(), X=X, y=y, noise=0.05, num_samples=2)
    kw = dict(generator=_gen(0), num_features=8)
    for key, value in over.items():
        (args if key in args else kw)[key] = value
    return sample_posterior(*args.values(), **kw)


_nan_y = _problem()[1].clone()
_nan_y[3] = math.nan


@pytest.mark.parametrize(
    "over,exc,name",
    [
        (dict(kernel="rbf"), TypeError, "kernel"),
        (dict(X=[[0.0, 1.0]]), TypeError, "X"),
        (dict(X=torch.zeros(20, dtype=F64)), ValueError, "X"),
        (dict(X=torch.zeros(20, 2, dtype=torch.int64)), TypeError, "X"),
        (dict(y=torch.zeros(19, dtype=F64)), ValueError, "y"),
        (dict(y=torch.zeros(20, dtype=torch.float32)), TypeError, "y"),
        (dict(y=_nan_y), ValueError, "y"),
        (dict(noise=0.0), ValueError, "noise"),
        (dict(noise=-1.0), ValueError, "noise"),
        (dict(noise=math.inf), ValueError, "noise"),
        (dict(num_samples=0), ValueError, "num_samples"),
        (dict(num_samples=True), TypeError, "num_samples"),
        (dict(num_samples=2.0), TypeError, "num_samples"),
        (dict(num_features=0), ValueError, "num_features"),
        (dict(generator=None), TypeError, "generator"),
        (dict(generator=0), TypeError, "generator"),
        (dict(mean=math.nan), ValueError, "mean"),
        (dict(mean=torch.zeros(20, dtype=F64)), ValueError, "mean"),
        (dict(mean="0"), TypeError, "mean"),
        (dict(solver="cg"), TypeError, "solver"),
        (dict(solver=lambda A, B: B[:, :1]), ValueError, "solver"),
        (dict(solver=lambda A, B: B * math.nan), ValueError, "solver"),
        (dict(solver=lambda A, B: (B, None, None)), ValueError, "solver"),
    ],
)
def test_bad_input_names_the_argument(over, exc, name):
    with pytest.raises(exc, match=name):
        _call(**over)


@pytest.mark.parametrize(
    "Xs,exc",
    [
        (torch.zeros(3, 3, dtype=F64), ValueError),
        (torch.zeros(3, 2, dtype=torch.float32), TypeError),
        (torch.full((3, 2), math.inf, dtype=F64), ValueError),
        (torch.zeros(3, dtype=F64), ValueError),
    ],
)
def test_bad_test_inputs_name_Xs(Xs, exc):
    samples = _call()
    with pytest.raises(exc, match="Xs"):
        samples(Xs)


def test_a_float_mean_is_kept_in_the_data_dtype():
    # torch.as_tensor(0.4) is float32: the mean used to become 0.4000000059604645
    X, y, _ = _problem()
    samples = sample_posterior(_kernel(), X, y, 0.05, 2, generator=_gen(4), mean=0.4)
    assert samples.mean.dtype == F64 and float(samples.mean) == 0.4
