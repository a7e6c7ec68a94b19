"""ULISSE: exact (deterministic) behaviour, counts, reproducibility and bad input.

Unbiasedness is tested statistically in ``tests/statistical/test_ulisse_unbiased.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pnsolve as pn
from pnsolve.randomized._ulisse_core import ulisse_trace
from pnsolve.testing import CountingOperator, krylov_tol

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _problem(n: int = 40, clusters: int = 8, num_rhs: int | None = None, seed: int = 0):
    return pn.problems.clustered(n, clusters=clusters, num_rhs=num_rhs, generator=_gen(seed))


def _slow_problem():
    """CG needs ~30 steps here, so every roulette step is a genuine (non-rounding) step."""
    return pn.problems.exponential_decay(40, cond=1e3, generator=_gen(1))


def _cg_iterate(A, b, steps: int) -> torch.Tensor:
    """The CG iterate after exactly ``steps`` steps (``x_0 = 0``)."""
    if steps == 0:
        return torch.zeros_like(b)
    x, info = pn.cg(A, b, rtol=0.0, atol=0.0, maxiter=steps)
    assert info.iterations == steps
    return x


def test_tiny_alpha_equals_cg_solution():
    pr = _problem()
    x, info = pn.randomized.ulisse(pr.A, pr.b, alpha=0.0, beta=1.0, generator=_gen())
    ref, _ = pn.cg(pr.A, pr.b, rtol=1e-14)
    tol = krylov_tol(F64, 100.0)
    assert float((x - ref).norm() / ref.norm()) <= tol
    assert float((x - pr.x_true).norm() / pr.x_true.norm()) <= tol
    assert info.stop_reason is pn.StopReason.CONVERGED and info.unbiased
    assert bool(info.converged) and not bool(info.by_roulette)
    assert int(info.roulette_steps) == 0 and info.weights.numel() == 0
    assert int(info.threshold_iterations) == info.iterations
    assert info.residual_norms.shape == (info.iterations + 1,)
    assert float(info.variance_estimates) == 0.0
    assert x.shape == pr.b.shape and x.dtype == pr.b.dtype


def test_estimate_is_threshold_iterate_plus_weighted_increments():
    """x̃ = x_l + Σ_{j≤J} W_j (x_{l+j} − x_{l+j−1}) with W_j = exp(β j(j+1)/2)."""
    pr = _slow_problem()
    beta = 0.05
    alpha = 0.05 * float(pr.b.norm())
    seen = set()
    for seed in range(12):
        x, info = pn.randomized.ulisse(pr.A, pr.b, alpha=alpha, beta=beta, generator=_gen(seed))
        l, J = int(info.threshold_iterations), int(info.roulette_steps)
        seen.add(J)
        rn = info.residual_norms
        assert bool(rn[l] <= alpha) and bool((rn[:l] > alpha).all())
        assert info.iterations == l + J
        j = torch.arange(1, J + 1, dtype=F64)
        assert torch.allclose(info.weights, torch.exp(beta * j * (j + 1) / 2))
        iterates = [_cg_iterate(pr.A, pr.b, s) for s in range(l, l + J + 1)]
        expected = iterates[0] + sum(
            (float(w) * (iterates[i + 1] - iterates[i]) for i, w in enumerate(info.weights)),
            torch.zeros_like(pr.b),
        )
        # Rounding in the increments is amplified by the weights.
        tol = krylov_tol(F64, 100.0) * (1.0 + float(info.weights.sum()))
        assert float((x - expected).norm() / expected.norm()) <= tol
        assert bool(info.by_roulette) != bool(info.converged)
    assert len(seen) > 1  # different seeds give different truncation points


def test_reproducible_with_same_seed():
    pr = _problem(num_rhs=5)
    kw = {"alpha": 0.1 * float(pr.b.norm(dim=0).min()), "beta": 0.1, "num_estimates": 2}
    x1, i1 = pn.randomized.ulisse(pr.A, pr.b, generator=_gen(7), **kw)
    x2, i2 = pn.randomized.ulisse(pr.A, pr.b, generator=_gen(7), **kw)
    assert torch.equal(x1, x2) and torch.equal(i1.roulette_steps, i2.roulette_steps)
    _, i3 = pn.randomized.ulisse(pr.A, pr.b, generator=_gen(8), **kw)
    assert not torch.equal(i1.roulette_steps, i3.roulette_steps)


@pytest.mark.parametrize("with_x0", [False, True])
@pytest.mark.parametrize("k", [None, 3])
def test_one_product_per_step(with_x0, k):
    pr = _problem(num_rhs=k)
    A = CountingOperator(pr.A)
    x0 = torch.ones_like(pr.b) if with_x0 else None
    alpha = 0.1 * float(pr.b.norm())
    x, info = pn.randomized.ulisse(A, pr.b, alpha=alpha, beta=0.2, generator=_gen(), x0=x0)
    assert info.products == A.matmat_calls == info.iterations + int(with_x0)
    assert info.matvecs == A.matvecs
    assert x.shape == pr.b.shape


def test_x0_and_alpha_zero_reach_the_solution():
    pr = _problem()
    x0 = torch.randn(pr.n, generator=_gen(3), dtype=F64)
    x, info = pn.randomized.ulisse(pr.A, pr.b, alpha=0.0, beta=1.0, generator=_gen(), x0=x0)
    assert float((x - pr.x_true).norm() / pr.x_true.norm()) <= krylov_tol(F64, 100.0)
    assert info.products == info.iterations + 1


def test_batched_columns_and_shapes():
    pr = _problem(num_rhs=4)
    x, info = pn.randomized.ulisse(pr.A, pr.b, alpha=0.0, beta=1.0, generator=_gen())
    assert x.shape == (pr.n, 4)
    for j in range(4):
        ref, _ = pn.cg(pr.A, pr.b[:, j], rtol=1e-14)
        assert float((x[:, j] - ref).norm() / ref.norm()) <= krylov_tol(F64, 100.0)
    for f in ("roulette_steps", "by_roulette", "converged", "variance_estimates"):
        assert getattr(info, f).shape == (4,)
    assert info.threshold_iterations.shape == (4,)
    assert info.residual_norms.shape == (info.iterations + 1, 4)
    x2, info2 = pn.randomized.ulisse(
        pr.A, pr.b, alpha=1.0, beta=0.3, generator=_gen(), num_estimates=2
    )
    assert x2.shape == (2, pr.n, 4) and info2.roulette_steps.shape == (2, 4)


def test_estimates_share_one_cg_run():
    pr = _slow_problem()
    alpha = 0.1 * float(pr.b.norm())
    A = CountingOperator(pr.A)
    x, info = pn.randomized.ulisse(
        A, pr.b, alpha=alpha, beta=0.05, generator=_gen(2), num_estimates=2
    )
    assert x.shape == (2, pr.n)
    l = int(info.threshold_iterations)
    assert info.iterations == l + int(info.roulette_steps.max()) == A.matmat_calls
    # Each estimate is the threshold iterate plus its own weighted increments.
    for e in range(2):
        J = int(info.roulette_steps[e])
        its = [_cg_iterate(pr.A, pr.b, s) for s in range(l, l + J + 1)]
        exp = its[0] + sum(
            (float(info.weights[i]) * (its[i + 1] - its[i]) for i in range(J)),
            torch.zeros_like(pr.b),
        )
        tol = krylov_tol(F64, 100.0) * (1.0 + float(info.weights[:J].sum()))
        assert float((x[e] - exp).norm() / exp.norm()) <= tol


def test_trace_exposes_cg_state_at_truncation():
    pr = _problem(num_rhs=2)
    A = pr.A
    trace = ulisse_trace(
        A, pr.b, None, alpha=0.2 * float(pr.b.norm(dim=0).min()), beta=0.2,
        generator=_gen(), maxiter=400, keep_directions=True,
    )  # fmt: skip
    steps = trace.info.iterations
    P, AP = trace.directions, trace.operator_directions
    assert P.shape == AP.shape == (steps, pr.n, 2)
    Ad = A.to_dense()
    assert torch.allclose(AP, Ad @ P)
    tol = krylov_tol(F64, 100.0)
    assert float((trace.residual - (pr.b - Ad @ trace.iterate)).norm() / pr.b.norm()) <= tol
    for c in range(2):  # directions of one column are A-conjugate
        Pc = P[:, :, c][P[:, :, c].norm(dim=1) > 0]
        G = Pc @ Ad @ Pc.T
        off = G - torch.diag(torch.diagonal(G))
        assert float(off.abs().max()) <= tol * float(torch.diagonal(G).abs().max())


def test_float32_follows_dtype():
    pr = pn.problems.clustered(30, clusters=5, generator=_gen(), dtype=torch.float32)
    x, info = pn.randomized.ulisse(pr.A, pr.b, alpha=0.0, beta=1.0, generator=_gen())
    assert x.dtype == torch.float32 and info.variance_estimates.dtype == torch.float32
    assert float((x - pr.x_true).norm() / pr.x_true.norm()) <= krylov_tol(torch.float32, 100.0)


def test_preconditioner_keeps_solution():
    pr = _problem()
    M = pn.linops.as_linop(torch.diag(1.0 / torch.diagonal(pr.A.to_dense())))
    x, info = pn.randomized.ulisse(pr.A, pr.b, alpha=0.0, beta=1.0, generator=_gen(), M=M)
    assert float((x - pr.x_true).norm() / pr.x_true.norm()) <= krylov_tol(F64, 100.0)
    assert info.stop_reason is pn.StopReason.CONVERGED


def test_zero_rhs_and_maxiter():
    pr = _problem()
    x, info = pn.randomized.ulisse(pr.A, torch.zeros(pr.n, dtype=F64), alpha=1.0, beta=1.0,
                                   generator=_gen())  # fmt: skip
    assert torch.equal(x, torch.zeros(pr.n, dtype=F64)) and info.iterations == 0
    assert info.stop_reason is pn.StopReason.ZERO_RHS
    x, info = pn.randomized.ulisse(pr.A, pr.b, alpha=0.0, beta=1.0, generator=_gen(), maxiter=3)
    assert info.iterations == 3 and info.stop_reason is pn.StopReason.MAX_ITERATIONS
    assert not info.unbiased
    assert float((x - _cg_iterate(pr.A, pr.b, 3)).norm()) <= krylov_tol(F64) * float(x.norm())


def test_expected_roulette_steps():
    beta = 0.3
    direct = math.fsum(math.exp(-beta * j * (j + 1) / 2) for j in range(1, 200))
    assert math.isclose(pn.randomized.expected_roulette_steps(beta), direct, rel_tol=1e-12)
    with pytest.raises(ValueError, match="beta"):
        pn.randomized.expected_roulette_steps(0.0)


def test_ulisse_variance_matches_double_sum():
    """Σ_m (W_m − W_{m−1}) e_{l+m−1}² = Σ_{j,k} (W_min(j,k) − 1) δ_{l+j}ᵀ δ_{l+k}."""
    pr = _slow_problem()
    l, T, beta = 3, 12, 0.2
    its = torch.stack([_cg_iterate(pr.A, pr.b, s) for s in range(T + 1)])
    # Take the solution to be x_T: errors beyond T are zero by construction.
    errors = (its[T] - its).norm(dim=1)
    delta = its[l + 1 :] - its[l:-1]  # δ_{l+1}, …, δ_T
    j = torch.arange(1, T - l + 1, dtype=F64)
    W = torch.exp(beta * j * (j + 1) / 2)
    Wmin = torch.minimum(W[:, None], W[None, :])
    double_sum = float(((Wmin - 1) * (delta @ delta.T)).sum())
    closed = pn.randomized.ulisse_variance(errors, l, beta)
    assert math.isclose(closed, double_sum, rel_tol=1e-8)
    assert math.isclose(
        pn.randomized.ulisse_variance(errors, l, beta, log10=True), math.log10(double_sum),
        rel_tol=1e-10,
    )  # fmt: skip
    with pytest.raises(ValueError, match="threshold_iterations"):
        pn.randomized.ulisse_variance(errors, T + 1, beta)


def test_not_positive_definite():
    A = -torch.eye(5, dtype=F64)
    with pytest.raises(pn.NotPositiveDefiniteError):
        pn.randomized.ulisse(A, torch.ones(5, dtype=F64), alpha=0.0, beta=1.0, generator=_gen())


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"generator": None}, TypeError, "generator"),
        ({"generator": 0}, TypeError, "generator"),
        ({"generator": np.random.default_rng(0)}, TypeError, "generator"),
        ({"alpha": -1.0}, ValueError, "alpha"),
        ({"alpha": float("nan")}, ValueError, "alpha"),
        ({"alpha": "1"}, TypeError, "alpha"),
        ({"beta": 0.0}, ValueError, "beta"),
        ({"beta": -0.5}, ValueError, "beta"),
        ({"beta": float("inf")}, ValueError, "beta"),
        ({"maxiter": -1}, ValueError, "maxiter"),
        ({"maxiter": 2.5}, TypeError, "maxiter"),
        ({"num_estimates": 1.5}, TypeError, "num_estimates"),
        ({"num_estimates": 0}, ValueError, "num_estimates"),
        ({"b": torch.ones(7, dtype=F64)}, ValueError, "b"),
        ({"b": torch.ones(6, 2, 1, dtype=F64)}, ValueError, "b"),
        ({"b": torch.tensor([1.0, float("nan"), 0, 0, 0, 0], dtype=F64)}, ValueError, "b"),
        ({"b": torch.ones(6, dtype=torch.float32)}, TypeError, "b"),
        ({"b": [1.0] * 6}, TypeError, "b"),
        ({"x0": torch.ones(5, dtype=F64)}, ValueError, "x0"),
        ({"x0": torch.full((6,), float("inf"), dtype=F64)}, ValueError, "x0"),
        ({"A": torch.ones(6, 5, dtype=F64)}, ValueError, "A"),
        ({"A": "matrix"}, TypeError, "A"),
        ({"M": torch.eye(5, dtype=F64)}, ValueError, "M"),
    ],
)
def test_bad_input_names_argument(kwargs, exc, name):
    args = {
        "A": 2.0 * torch.eye(6, dtype=F64),
        "b": torch.ones(6, dtype=F64),
        "alpha": 0.1,
        "beta": 1.0,
        "generator": _gen(),
    }
    args.update(kwargs)
    A, b = args.pop("A"), args.pop("b")
    with pytest.raises(exc, match=name):
        pn.randomized.ulisse(A, b, **args)


@pytest.mark.parametrize("num_estimates", [None, 1, 3])
@pytest.mark.parametrize("shape", [(12,), (12, 2)])
def test_output_shape_follows_num_estimates(num_estimates, shape):
    # one rule: None → b's shape; an int E → (E, *b.shape), also for E = 1
    A = torch.diag(torch.linspace(1.0, 3.0, 12, dtype=torch.float64))
    b = torch.ones(*shape, dtype=torch.float64)
    x, info = pn.randomized.ulisse(
        A, b, alpha=0.5, beta=0.5, generator=_gen(), num_estimates=num_estimates
    )
    expected = shape if num_estimates is None else (num_estimates, *shape)
    assert x.shape == expected
    per_run = list(expected)
    del per_run[0 if num_estimates is None else 1]  # drop n: one value per estimate, column
    assert tuple(info.variance_estimates.shape) == tuple(per_run)
    assert tuple(info.converged.shape) == tuple(per_run)


def test_the_first_step_is_always_deterministic_as_in_the_papers_algorithm():
    # the threshold is checked after each CG step (Algorithm 1), so l ≥ 1 even when the
    # initial residual is already below alpha
    A = torch.diag(torch.arange(1.0, 11.0, dtype=torch.float64))
    b = torch.ones(10, dtype=torch.float64)
    _, info = pn.randomized.ulisse(
        A, b, alpha=10 * float(b.norm()), beta=50.0, generator=torch.Generator().manual_seed(0)
    )
    assert int(info.threshold_iterations) == 1
    assert int(info.roulette_steps) == 0  # β = 50: the roulette stops at once
