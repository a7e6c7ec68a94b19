"""StochasticGradientDescent: Algorithm 3's steps, reproducibility, true residuals,
divergence, budgets in iterations."""

from __future__ import annotations

import math

import pytest
import torch
from iterative_support import build_problem

from pnsolve.iterative import StochasticGradientDescent
from pnsolve.testing import exact_tol, iterative_tol

F64 = torch.float64
#: The paper's τ (a solver setting, not a test tolerance).
PAPER_TOL = 1e-2
BATCH = 40
BUDGET = 5.0


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_same_generator_same_result():
    p = build_problem()
    solver = StochasticGradientDescent(tol=PAPER_TOL, batch_size=BATCH)
    U_a, a = solver.solve(p.system, p.B, generator=_gen(3))
    U_b, b = solver.solve(p.system, p.B, generator=_gen(3))
    U_c, _c = solver.solve(p.system, p.B, generator=_gen(4))
    assert torch.equal(U_a, U_b) and a.history == b.history
    assert not torch.equal(U_a, U_c)


def test_reported_residuals_are_true_ones_and_cost_one_setup_epoch(counter):
    p = build_problem(noise=0.05)
    count = counter(p.system)
    solver = StochasticGradientDescent(tol=iterative_tol(F64), batch_size=BATCH)
    U_r, r = solver.solve(p.system, p.B, max_epochs=BUDGET, generator=_gen())
    relres = p.relres(U_r)
    assert not r.converged
    assert r.iterations == math.floor(BUDGET * p.n / BATCH)
    assert r.residual_norm_mean == pytest.approx(float(relres[0]), rel=exact_tol(F64, p.n))
    assert r.residual_norm_probes == pytest.approx(float(relres[1:].mean()), rel=exact_tol(F64))
    # entries: the batch products plus exactly one true-residual product (set-up)
    assert count.entries == r.iterations * BATCH * p.n + p.n * p.n
    assert r.setup_epochs == 1.0
    assert r.epochs - r.setup_epochs <= BUDGET * (1 + exact_tol(F64))  # float rounding


def test_estimate_claims_are_checked(counter):
    p = build_problem()
    count = counter(p.system)
    _, r = StochasticGradientDescent(tol=PAPER_TOL, batch_size=BATCH).solve(
        p.system, p.B, generator=_gen()
    )
    checks, rest = divmod(count.entries - r.iterations * BATCH * p.n, p.n * p.n)
    assert r.converged and rest == 0 and checks >= 1
    assert r.epochs == count.entries / (p.n * p.n)
    assert r.setup_epochs == checks


@pytest.mark.parametrize("warm", [False, True])
def test_iterations_follow_algorithm_3(counter, warm):
    """Two iterations by hand, with the same generator draws: ``g[I] = K̂[I, :]v − b̃[I]``,
    ``m ← ρm − (γ/b) g``, ``v ← v + m``, ``r[I] ← g[I]`` (up to sign)."""
    p = build_problem()
    gamma, rho, steps = 1.3, 0.8, 2
    x0 = 0.1 * p.B if warm else None
    solver = StochasticGradientDescent(
        tol=iterative_tol(F64),
        batch_size=BATCH,
        learning_rate=gamma,
        momentum=rho,
        max_iterations=steps,
    )
    count = counter(p.system)
    U_r, r = solver.solve(p.system, p.B, x0, generator=_gen(7))

    g_ = _gen(7)
    scale = torch.linalg.vector_norm(p.B, dim=0)
    b = p.B / scale
    v = torch.zeros_like(b) if x0 is None else x0 / scale
    r_est = b - p.K @ v  # the true residual of the start (= b̃ for a cold start)
    m = torch.zeros_like(b)
    for t in range(steps):
        I = torch.randperm(p.n, generator=g_)[:BATCH]
        g = torch.zeros_like(b)
        g[I] = p.K[I] @ v - b[I]
        m = rho * m - (gamma / BATCH) * g
        v = v + m
        r_est[I] = -g[I]  # the paper stores g[I]; same norms
        norms = torch.linalg.vector_norm(r_est, dim=0)
        assert r.history[t][1] == pytest.approx(float(norms[0]), rel=exact_tol(F64, p.n))
        assert r.history[t][2] == pytest.approx(float(norms[1:].mean()), rel=exact_tol(F64, p.n))
    err = torch.linalg.matrix_norm(U_r - v * scale) / torch.linalg.matrix_norm(v * scale)
    assert r.iterations == steps and float(err) <= exact_tol(F64, p.n)
    true = torch.linalg.vector_norm(b - p.K @ v, dim=0)  # reported: the final true residual
    assert r.residual_norm_mean == pytest.approx(float(true[0]), rel=exact_tol(F64, p.n))
    assert count.by_access["rows"] == steps * BATCH * p.n
    assert r.setup_epochs == (2.0 if warm else 1.0)  # warm-start residual, final residual


@pytest.mark.parametrize("iterations", [1, 2, 3, 5])
def test_budget_of_m_batches_runs_m_iterations(iterations):
    """``max_epochs = m·b/n`` (rounded in floating point) allows exactly ``m`` iterations."""
    p = build_problem(noise=0.02)
    solver = StochasticGradientDescent(tol=iterative_tol(F64), batch_size=BATCH)
    _, r = solver.solve(p.system, p.B, max_epochs=iterations * BATCH / p.n, generator=_gen())
    assert r.iterations == iterations


def test_too_large_learning_rate_is_reported():
    p = build_problem()
    solver = StochasticGradientDescent(batch_size=BATCH, learning_rate=1e3)
    with pytest.raises(ValueError, match="learning_rate"):
        solver.solve(p.system, p.B, generator=_gen())


def test_plain_sgd_and_full_batches_converge():
    p = build_problem()
    for solver in (
        StochasticGradientDescent(tol=PAPER_TOL, batch_size=BATCH, momentum=0.0),
        StochasticGradientDescent(tol=PAPER_TOL, batch_size=10 * p.n),
    ):
        U_r, r = solver.solve(p.system, p.B, generator=_gen())
        assert r.converged and float(p.relres(U_r)[0]) <= PAPER_TOL


def test_generator_is_required():
    p = build_problem()
    with pytest.raises(TypeError, match="generator"):
        StochasticGradientDescent().solve(p.system, p.B)
    with pytest.raises(TypeError, match="generator"):
        StochasticGradientDescent().solve(p.system, p.B, generator=1)


def test_budget_below_one_batch_raises():
    p = build_problem()
    solver = StochasticGradientDescent(batch_size=BATCH)
    tiny = 0.99 * BATCH / p.n
    with pytest.raises(ValueError, match="max_epochs"):
        solver.solve(p.system, p.B, max_epochs=tiny, generator=_gen())
    with pytest.raises(ValueError, match="max_epochs"):
        solver.solve(p.system, p.B, p.B, max_epochs=tiny, generator=_gen())


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 2.0}, TypeError, "batch_size"),
        ({"learning_rate": 0.0}, ValueError, "learning_rate"),
        ({"learning_rate": float("inf")}, ValueError, "learning_rate"),
        ({"momentum": 1.0}, ValueError, "momentum"),
        ({"momentum": -0.1}, ValueError, "momentum"),
        ({"momentum": "0.9"}, TypeError, "momentum"),
    ],
)
def test_bad_configuration_names_the_argument(kwargs, error, name):
    with pytest.raises(error, match=name):
        StochasticGradientDescent(**kwargs)
