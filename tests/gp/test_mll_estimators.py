"""Marginal-likelihood gradient estimators: exact algebra, chunking, warm starts, errors.

Statistical properties (unbiasedness, covariance of the pathwise probes, posterior
samples) are in ``test_mll_estimators_statistics.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

import pnsolve as pn
from pnsolve.gp.mll_estimators import (
    ExactEstimator,
    GradientEstimator,
    PathwiseEstimator,
    StandardEstimator,
)
from pnsolve.gp.mll_estimators._surrogate import DEFAULT_CHUNK_ENTRIES, chunk_rows_for
from pnsolve.kernels import RandomFourierFeatures
from pnsolve.kernels.base import inv_softplus
from pnsolve.testing import exact_tol, krylov_tol
from pnsolve.testing.device import suite_device

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _problem(n=30, d=2, seed=0, dtype=F64):
    g = _gen(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(4 * X.sum(-1)) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X.to(dtype), (y - y.mean()).to(dtype)


def _model(d=2, noise=0.1):
    """Matérn-3/2 ARD kernel and a softplus-parametrised noise (leaf ``raw_noise``)."""
    kernel = pn.kernels.Matern(
        1.5,
        lengthscale=torch.tensor([0.3, 0.5][:d], dtype=F64),
        outputscale=torch.tensor(1.2, dtype=F64),
    )
    raw_noise = nn.Parameter(inv_softplus(torch.tensor(noise, dtype=F64)))
    return kernel, raw_noise


def _leaves(kernel, raw_noise):
    return [kernel.raw_lengthscale, kernel.raw_outputscale, raw_noise]


def _take_grads(leaves) -> torch.Tensor:
    """Flattened ``.grad`` of the leaves (zeros where None); resets them."""
    out = torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in leaves]
    )
    for p in leaves:
        p.grad = None
    return out.clone()


def _khat(kernel, X, noise):
    with torch.no_grad():
        return kernel(X) + float(noise) * torch.eye(X.shape[0], dtype=X.dtype)


def _solve(kernel, X, noise, B):
    with torch.no_grad():
        return torch.cholesky_solve(B, torch.linalg.cholesky(_khat(kernel, X, noise)))


def _exact_grad(kernel, raw_noise, X, y):
    """Autograd of −ExactGP.log_marginal_likelihood w.r.t. the leaves."""
    noise = nn.functional.softplus(raw_noise)
    gp = pn.gp.ExactGP(kernel, noise=float(noise.detach()))
    loss = -gp.log_marginal_likelihood(X, y, noise=noise)
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, _leaves(kernel, raw_noise))])


def _estimators(s=3, m=50, seed=1, chunk_rows=None):
    return [
        StandardEstimator(s, generator=_gen(seed), chunk_rows=chunk_rows),
        StandardEstimator(s, "rademacher", generator=_gen(seed), chunk_rows=chunk_rows),
        PathwiseEstimator(s, m, generator=_gen(seed), chunk_rows=chunk_rows),
    ]


# ----------------------------------------------------------------------------- exact
def test_exact_estimator_matches_autograd_of_exact_gp():
    X, y = _problem()
    kernel, raw_noise = _model()
    reference = _exact_grad(kernel, raw_noise, X, y)
    est = ExactEstimator()
    assert isinstance(est, GradientEstimator)
    assert est.num_probes == 0 and est.needs_solves is False
    assert torch.equal(est.targets(kernel, X, nn.functional.softplus(raw_noise), y), y[:, None])
    noise = nn.functional.softplus(raw_noise)
    est.backward(kernel, X, noise, y, None)
    got = _take_grads(_leaves(kernel, raw_noise))
    torch.testing.assert_close(got, reference, rtol=exact_tol(F64, X.shape[0]), atol=0.0)
    # accumulates, and the caller's noise graph is still usable afterwards
    est.backward(kernel, X, noise, y, None)
    est.backward(kernel, X, noise, y, None)
    got2 = _take_grads(_leaves(kernel, raw_noise))
    torch.testing.assert_close(got2, 2 * reference, rtol=exact_tol(F64, X.shape[0]), atol=0.0)
    noise.backward()
    assert raw_noise.grad is not None


def test_standard_with_scaled_identity_probes_is_exact():
    # With probes Z = √n·I (s = n) Hutchinson's sum is exactly tr(K̂⁻¹ ∂K̂), so with exact
    # solves the standard estimate equals the exact gradient: checks signs and the ½, 1/s.
    X, y = _problem(n=25)
    n = X.shape[0]
    kernel, raw_noise = _model()
    reference = _exact_grad(kernel, raw_noise, X, y)
    est = StandardEstimator(n, generator=_gen(0), chunk_rows=7)
    est.load_state_dict({"probes": math.sqrt(n) * torch.eye(n, dtype=F64)})
    noise = nn.functional.softplus(raw_noise)
    V = _solve(kernel, X, noise, est.targets(kernel, X, noise, y))
    est.backward(kernel, X, noise, y, V)
    got = _take_grads(_leaves(kernel, raw_noise))
    cond = float(torch.linalg.cond(_khat(kernel, X, noise)))
    tol = krylov_tol(F64, cond) * float(reference.abs().max())
    torch.testing.assert_close(got, reference, rtol=0.0, atol=tol)


# -------------------------------------------------------------------- chunked = dense
def _dense_surrogate_grad(est, kernel, raw_noise, X, V):
    """Autograd of the surrogate Σ_c u_cᵀ K̂(θ) w_c built densely (the reference)."""
    s = est.num_probes
    U = torch.cat([-0.5 * V[:, :1], (0.5 / s) * V[:, 1:]], dim=1)
    probes = est.probes if isinstance(est, StandardEstimator) else V[:, 1:]
    W = torch.cat([V[:, :1], probes], dim=1)
    noise = nn.functional.softplus(raw_noise)
    Khat = kernel(X) + noise * torch.eye(X.shape[0], dtype=X.dtype)
    S = (U * (Khat @ W)).sum()
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(S, _leaves(kernel, raw_noise))])


@given(
    n=st.integers(1, 23),
    chunk_rows=st.integers(1, 26),
    s=st.integers(1, 4),
    which=st.integers(0, 2),
    seed=st.integers(0, 2**16),
)
def test_chunked_backward_equals_dense_surrogate(n, chunk_rows, s, which, seed):
    # Any vectors V (not only solutions): the chunked backward is exactly the gradient of
    # the same bilinear surrogate, for every split of the rows into blocks.
    X, y = _problem(n=n, seed=seed)
    kernel, raw_noise = _model()
    est = _estimators(s=s, m=20, seed=seed, chunk_rows=chunk_rows)[which]
    noise = nn.functional.softplus(raw_noise)
    est.targets(kernel, X, noise, y)
    V = torch.randn(n, 1 + s, generator=_gen(seed + 1), dtype=F64)
    reference = _dense_surrogate_grad(est, kernel, raw_noise, X, V)
    est.backward(kernel, X, noise, y, V)
    got = _take_grads(_leaves(kernel, raw_noise))
    scale = float(V.abs().max() ** 2 * n * n * 2)  # |Σ G ∂K̂| ≤ Σ|G||∂K̂|, ∂K̂ entries O(1)
    torch.testing.assert_close(got, reference, rtol=0.0, atol=exact_tol(F64, n * n) * scale)


def test_backward_builds_only_row_blocks(monkeypatch):
    X, y = _problem(n=30)
    kernel, raw_noise = _model()
    shapes = []
    dense = kernel._dense

    def spy(X1, X2, self_index=None):
        shapes.append((X1.shape[0], X2.shape[0], torch.is_grad_enabled()))
        return dense(X1, X2, self_index=self_index)

    monkeypatch.setattr(kernel, "_dense", spy)
    est = PathwiseEstimator(2, 16, generator=_gen(0), chunk_rows=8)
    noise = nn.functional.softplus(raw_noise)
    B = est.targets(kernel, X, noise, y)
    V = torch.randn_like(B)
    est.backward(kernel, X, noise, y, V)
    assert [r for r, _, _ in shapes] == [8, 8, 8, 6]
    assert all(c == 30 and grad for _, c, grad in shapes)
    assert chunk_rows_for(10**6, None) == DEFAULT_CHUNK_ENTRIES // 10**6
    assert chunk_rows_for(5, None) == 5 and chunk_rows_for(5, 100) == 5


def test_float_noise_and_float32_inputs():
    X, y = _problem(dtype=torch.float32)
    kernel, _ = _model()
    for est in _estimators():
        B = est.targets(kernel, X, 0.1, y)
        assert B.dtype == torch.float32 and B.shape == (30, 4)
        est.backward(kernel, X, 0.1, y, torch.ones_like(B))
        assert kernel.raw_lengthscale.grad.dtype == F64
        assert bool(torch.isfinite(kernel.raw_lengthscale.grad).all())
        kernel.zero_grad()


# ----------------------------------------------------------------------- warm starts
@pytest.mark.parametrize("which", [0, 1, 2])
def test_targets_frozen_across_calls(which):
    X, y = _problem()
    kernel, raw_noise = _model()
    est = _estimators()[which]
    noise = nn.functional.softplus(raw_noise)
    B1 = est.targets(kernel, X, noise, y)
    B2 = est.targets(kernel, X, noise, y)
    assert torch.equal(B1, B2) and torch.equal(B1[:, 0], y)
    assert not B1.requires_grad
    state = {k: v.clone() for k, v in est.state_dict().items() if k != "generator_state"}
    # change the hyperparameters
    kernel.lengthscale = torch.tensor([0.6, 0.2], dtype=F64)
    kernel.outputscale = 0.7
    B3 = est.targets(kernel, X, 0.3, y)
    after = {k: v for k, v in est.state_dict().items() if k != "generator_state"}
    assert state.keys() == after.keys() and all(torch.equal(state[k], after[k]) for k in state)
    if isinstance(est, PathwiseEstimator):
        assert not torch.allclose(B3[:, 1:], B1[:, 1:])
    else:
        assert torch.equal(B3, B1)
    # resample draws new probes
    est.resample()
    assert not torch.equal(est.targets(kernel, X, 0.3, y)[:, 1:], B3[:, 1:])


def test_pathwise_targets_follow_current_hyperparameters():
    # ξ_j = φ(X) w_f + √σ² w with φ the RandomFourierFeatures of the *same* base draws
    # (documented draw order: RFF ε and b, then w_f (m, s), then w (n, s)).
    X, y = _problem()
    kernel, _ = _model()
    m, s = 40, 3
    est = PathwiseEstimator(s, m, generator=_gen(5))
    for ls, os_, noise in [((0.3, 0.5), 1.2, 0.1), ((0.8, 0.1), 0.4, 0.02)]:
        kernel.lengthscale = torch.tensor(ls, dtype=F64)
        kernel.outputscale = os_
        B = est.targets(kernel, X, torch.tensor(noise, dtype=F64), y)
        g = _gen(5)
        rff = RandomFourierFeatures(kernel, m, 2, generator=g, dtype=F64, device=suite_device())
        wf = torch.randn(m, s, generator=g, dtype=F64)
        w = torch.randn(30, s, generator=g, dtype=F64)
        with torch.no_grad():
            xi = rff.features(X) @ wf + math.sqrt(noise) * w
            torch.testing.assert_close(est.features(kernel, X), rff.features(X), rtol=0, atol=0)
        torch.testing.assert_close(B[:, 1:], xi, rtol=exact_tol(F64, m), atol=0.0)
        draws = est.draws
        assert torch.equal(draws.feature_weights, wf) and torch.equal(draws.noise_weights, w)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_state_dict_round_trip_reproduces_targets(which):
    X, y = _problem()
    kernel, _ = _model()
    a = _estimators(seed=3)[which]
    Ba = a.targets(kernel, X, 0.1, y)
    state = a.state_dict()
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    b = _estimators(seed=99)[which]  # other seed: everything comes from the state dict
    b.load_state_dict(state)
    assert torch.equal(b.targets(kernel, X, 0.1, y), Ba)
    # the generator state travels too: the next resample draws the same in both
    a.resample()
    b.resample()
    assert torch.equal(a.targets(kernel, X, 0.1, y), b.targets(kernel, X, 0.1, y))
    # a state dict saved before the first draw restores the lazy draw exactly
    c, e = _estimators(seed=7)[which], _estimators(seed=8)[which]
    e.load_state_dict(c.state_dict())
    assert torch.equal(c.targets(kernel, X, 0.1, y), e.targets(kernel, X, 0.1, y))


def test_posterior_mean_and_samples_follow_formula():
    X, y = _problem(n=20)
    Xs = torch.rand(4, 2, generator=_gen(2), dtype=F64)
    kernel, _ = _model()
    est = PathwiseEstimator(3, 30, generator=_gen(1))
    B = est.targets(kernel, X, 0.1, y)
    V = _solve(kernel, X, 0.1, B)
    with torch.no_grad():
        F = est.posterior_samples(kernel, X, 0.1, y, V, Xs)
        mean = est.posterior_mean(kernel, X, 0.1, y, V, Xs)
        ref = est.prior_samples(kernel, Xs) + kernel(Xs, X) @ (V[:, :1] - V[:, 1:])
        post = pn.gp.ExactGP(kernel, noise=0.1).fit(X, y).posterior(Xs)
    torch.testing.assert_close(F, ref, rtol=exact_tol(F64, 30), atol=0.0)
    cond = float(torch.linalg.cond(_khat(kernel, X, 0.1)))
    torch.testing.assert_close(mean, post.mean, rtol=0.0, atol=krylov_tol(F64, cond))
    assert F.shape == (4, 3) and mean.shape == (4,)


# ------------------------------------------------------------------------ bad inputs
def _ok():
    X, y = _problem(n=10)
    kernel, _ = _model()
    return kernel, X, y


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: StandardEstimator(0, generator=_gen(0)), "num_probes"),
        (lambda: PathwiseEstimator(0, generator=_gen(0)), "num_probes"),
        (lambda: PathwiseEstimator(4, 0, generator=_gen(0)), "num_features"),
        (lambda: StandardEstimator(4, "uniform", generator=_gen(0)), "distribution"),
        (lambda: StandardEstimator(4, generator=_gen(0), chunk_rows=0), "chunk_rows"),
    ],
)
def test_bad_configuration_raises_value_error(make, name):
    with pytest.raises(ValueError, match=name):
        make()


@pytest.mark.parametrize("cls", [StandardEstimator, PathwiseEstimator])
def test_missing_generator_raises_type_error(cls):
    with pytest.raises(TypeError, match="generator"):
        cls(4)
    with pytest.raises(TypeError, match="generator"):
        cls(4, generator=None)
    with pytest.raises(TypeError, match="generator"):
        cls(4, generator=0)


@pytest.mark.parametrize("which", [0, 2])
def test_bad_call_arguments_raise_naming_the_argument(which):
    kernel, X, y = _ok()
    est = _estimators()[which]
    B = est.targets(kernel, X, 0.1, y)
    V = torch.zeros_like(B)
    cases = [
        ((kernel, X, 0.1, y[:5]), ValueError, "y"),
        ((kernel, X, 0.1, y.float()), TypeError, "y"),
        ((kernel, X[:, 0], 0.1, y), ValueError, "X"),
        ((kernel, X.float(), 0.1, y.float()), TypeError, "X"),
        ((kernel, X, -1.0, y), ValueError, "noise"),
        ((kernel, X, torch.ones(2, dtype=F64), y), ValueError, "noise"),
        ((kernel, X, "0.1", y), TypeError, "noise"),
        (("rbf", X, 0.1, y), TypeError, "kernel"),
        ((kernel, torch.cat([X, X]), 0.1, torch.cat([y, y])), ValueError, "resample"),
    ]
    for args, exc, name in cases:
        with pytest.raises(exc, match=name):
            est.targets(*args)
    with pytest.raises(ValueError, match="solutions"):
        est.backward(kernel, X, 0.1, y, V[:, :2])
    with pytest.raises(TypeError, match="solutions"):
        est.backward(kernel, X, 0.1, y, V.float())
    with pytest.raises(TypeError, match="solutions"):
        est.backward(kernel, X, 0.1, y, V.numpy())
    with pytest.raises(ValueError, match="solutions"):
        est.backward(kernel, X, 0.1, y, torch.full_like(V, math.nan))
    with pytest.raises(ValueError, match="Xs"):
        est.posterior_mean(kernel, X, 0.1, y, V, X[:, :1])
    with pytest.raises(ValueError, match="state_dict"):
        est.load_state_dict({"probes": V})
    with pytest.raises(ValueError, match="shape"):
        bad = {k: v[..., :-1] if k != "generator_state" else v for k, v in est.state_dict().items()}
        est.load_state_dict(bad)


def test_backward_before_targets_and_exact_solutions_shape():
    kernel, X, y = _ok()
    with pytest.raises(RuntimeError, match="targets"):
        StandardEstimator(2, generator=_gen(0)).backward(
            kernel, X, 0.1, y, torch.zeros(10, 3, dtype=F64)
        )
    with pytest.raises(RuntimeError, match="targets"):
        PathwiseEstimator(2, 8, generator=_gen(0)).prior_samples(kernel, X)
    with pytest.raises(ValueError, match="solutions"):
        ExactEstimator().backward(kernel, X, 0.1, y, torch.zeros(10, 2, dtype=F64))
    with pytest.raises(ValueError, match="columns"):
        est = PathwiseEstimator(2, 8, generator=_gen(0))
        est.targets(kernel, X, 0.1, y)
        X3 = torch.rand(10, 3, dtype=F64)
        est.targets(pn.kernels.RBF(0.3), X3, 0.1, y)
