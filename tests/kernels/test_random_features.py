"""Random Fourier features: 1/√m convergence, frozen draws, explicit generators."""

from __future__ import annotations

import statistics

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels import RandomFourierFeatures
from pnsolve.testing.device import suite_device
from pnsolve.testing.tolerances import exact_tol, statistical_threshold

F64 = torch.float64


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _X(n=30, d=2, seed=0, dtype=F64):
    return torch.randn(n, d, generator=_gen(seed), dtype=dtype)


def _kernels():
    ls = torch.tensor(0.8, dtype=F64)
    return [pn.kernels.RBF(ls), pn.kernels.Matern(0.5, ls), pn.kernels.Matern(1.5, ls)]


@pytest.mark.parametrize("kernel", _kernels(), ids=["rbf", "matern12", "matern32"])
def test_error_shrinks_like_one_over_sqrt_m(kernel):
    # E‖φφᵀ − K‖²_F = C/m (Monte-Carlo average of m i.i.d. rank-one terms), so the mean
    # relative Frobenius error over 16 independent generators should drop by √16 = 4 from
    # m to 16m. Across repetitions with other seeds this ratio of means has mean ≈ 4.0–4.2
    # and standard deviation ≈ 0.15–0.3 (measured, 20 repetitions per kernel); accepting
    # [4/1.5, 4·1.5] leaves more than 4 standard deviations on either side (false-alarm
    # probability < 1e-4 for a fresh choice of the fixed seeds below).
    X = _X()
    with torch.no_grad():
        K = kernel(X)

        def err(m, seed):
            f = RandomFourierFeatures(
                kernel, m, 2, generator=_gen(seed), dtype=F64, device=suite_device()
            )
            return float(torch.linalg.norm(f.approx_kernel(X) - K) / torch.linalg.norm(K))

        small = statistics.mean(err(64, s) for s in range(16))
        large = statistics.mean(err(1024, 100 + s) for s in range(16))
    assert 4 / 1.5 <= small / large <= 4 * 1.5


def test_hyperparameter_change_reuses_frozen_draws():
    k = pn.kernels.RBF(lengthscale=torch.tensor([0.5, 2.0], dtype=F64))
    g = _gen(7)
    rff = RandomFourierFeatures(k, 50, 2, generator=g, dtype=F64, device=suite_device())
    state = g.get_state()
    X = _X()
    with torch.no_grad():
        k.lengthscale = torch.tensor([1.0, 0.3], dtype=F64)
        k.outputscale = 2.5
        F = rff.features(X)
    assert torch.equal(g.get_state(), state)  # evaluation draws nothing
    expected = (2 * 2.5 / 50) ** 0.5 * torch.cos(
        (X / torch.tensor([1.0, 0.3], dtype=F64)) @ rff.base_frequencies.mT + rff.phases
    )
    tol = exact_tol(F64, 2)
    assert float((F - expected).abs().max()) <= tol


def test_features_are_differentiable_and_follow_input_dtype():
    k = pn.kernels.Matern(2.5, lengthscale=0.7)
    rff = RandomFourierFeatures(k, 20, 3, generator=_gen(0), device=suite_device())
    for dtype in (torch.float32, F64):
        F = rff(_X(5, 3, dtype=dtype))
        assert F.shape == (5, 20) and F.dtype == dtype
        F.sum().backward()
        assert torch.isfinite(k.raw_lengthscale.grad) and torch.isfinite(k.raw_outputscale.grad)
        k.zero_grad()


def test_prior_samples_keep_weights_fixed():
    rff = RandomFourierFeatures(
        pn.kernels.RBF(0.5), 40, 2, generator=_gen(1), dtype=F64, device=suite_device()
    )
    X, Xnew = _X(), _X(8, seed=5)
    with torch.no_grad():
        f = rff.sample_prior(X, 3, generator=_gen(2))
        w = rff.weights(3, generator=_gen(2))
        assert f.shape == (30, 3) and w.shape == (40, 3)
        assert torch.equal(f, rff.evaluate(X, w))
        both = rff.evaluate(torch.cat([X, Xnew]), w)  # same draws at new inputs
        assert float((both[:30] - f).abs().max()) <= exact_tol(F64, 40)


def test_generator_must_be_explicit():
    k = pn.kernels.RBF()
    for bad in (None, 0, "seed"):
        with pytest.raises(TypeError, match="generator"):
            RandomFourierFeatures(k, 10, 2, generator=bad, device=suite_device())
    rff = RandomFourierFeatures(k, 10, 2, generator=_gen(0), device=suite_device())
    with pytest.raises(TypeError, match="generator"):
        rff.sample_prior(_X(dtype=torch.float32), 2, generator=None)
    with pytest.raises(ValueError, match="num_features"):
        RandomFourierFeatures(k, 0, 2, generator=_gen(0), device=suite_device())
    with pytest.raises(ValueError, match="X"):
        rff.features(_X(4, 3, dtype=torch.float32))
    with pytest.raises(ValueError, match="input_dim"):
        RandomFourierFeatures(
            pn.kernels.RBF(ard_dims=3), 10, 2, generator=_gen(0), device=suite_device()
        )


@pytest.mark.statistical
def test_matern_base_frequencies_are_student_t():
    # Student-t with 2ν = 3 degrees of freedom: its 4th moment is infinite, so compare the
    # median of |ω| (a robust statistic) with the exact one, t_3.ppf(0.75). Standard error of
    # a sample median: 1 / (2 f_|t|(q) √N) with f_|t| = 2 f_t. False-alarm level 1e-4.
    from scipy.stats import t

    q = float(t.ppf(0.75, 3))
    n = 20000
    se = 1.0 / (2 * 2 * float(t.pdf(q, 3)) * n**0.5)
    rff = RandomFourierFeatures(
        pn.kernels.Matern(1.5), n, 1, generator=_gen(3), dtype=F64, device=suite_device()
    )
    med = float(rff.base_frequencies.abs().median())
    assert abs(med - q) <= statistical_threshold(1e-4) * se
