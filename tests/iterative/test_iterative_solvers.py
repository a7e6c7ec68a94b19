"""Properties every kernel-system solver shares (CG, alternating projections, SGD)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from iterative_support import KERNELS, SOLVERS, build_problem

from pnsolve.iterative import SolveResult
from pnsolve.testing import exact_tol, iterative_tol, krylov_tol

F64, F32 = torch.float64, torch.float32
#: Loose tolerance for tests about budgets and bookkeeping, not accuracy.
LOOSE = 1e-2
NOISES = (0.3, 1.0)


def _solve(solver, p, x0=None, seed=0, **kw) -> SolveResult:
    return solver.solve(p.system, p.B, x0, generator=torch.Generator().manual_seed(seed), **kw)


def _assert_converged(p, result, tol, tol_probes=None):
    """TRUE residuals meet the tolerances and the reported norms are the true ones."""
    tol_probes = tol if tol_probes is None else tol_probes
    relres = p.relres(result.solution)
    assert result.converged
    assert float(relres[0]) <= tol
    assert float(relres[1:].mean()) <= tol_probes
    # reported norms = true norms, up to the rounding of the residual itself
    slack = krylov_tol(p.B.dtype, p.cond())
    assert result.residual_norm_mean == pytest.approx(float(relres[0]), abs=slack)
    assert result.residual_norm_probes == pytest.approx(float(relres[1:].mean()), abs=slack)


@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_converges_to_the_direct_solution(make_solver, kernel, noise, dtype):
    p = build_problem(kernel=kernel, noise=noise, dtype=dtype)
    tol = iterative_tol(dtype)
    result = _solve(make_solver(tol=tol), p)
    _assert_converged(p, result, tol)
    exact = p.exact()
    err = torch.linalg.matrix_norm(result.solution.double() - exact) / torch.linalg.matrix_norm(
        exact
    )
    assert float(err) <= p.cond() * tol * math.sqrt(p.B.shape[1])
    assert result.solution.dtype == dtype and result.solution.shape == p.B.shape
    assert len(result.history) == result.iterations


@settings(max_examples=5)
@given(
    # moderately conditioned systems: AP and SGD need thousands of epochs beyond these
    lengthscale=st.floats(0.2, 0.8),
    noise=st.floats(0.2, 2.0),
    k=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_meets_default_tolerance_on_random_kernel_systems(lengthscale, noise, k, seed):
    p = build_problem(60, 3, k, noise=noise, seed=seed, lengthscale=lengthscale)
    for make in SOLVERS.values():
        result = _solve(make(), p, seed=seed)
        relres = p.relres(result.solution)
        assert result.converged
        assert float(relres[0]) <= make().tol
        if k > 1:
            assert float(relres[1:].mean()) <= make().tol
        else:
            assert math.isnan(result.residual_norm_probes)


def test_warm_start_at_the_solution_needs_at_most_one_iteration(make_solver):
    p = build_problem()
    tol = iterative_tol(F64)
    x0 = p.exact()
    result = _solve(make_solver(tol=tol), p, x0)
    assert result.iterations <= 1
    _assert_converged(p, result, tol)


def test_warm_start_near_the_solution_is_cheaper_and_agrees(make_solver):
    p = build_problem()
    tol = iterative_tol(F64)
    solver = make_solver(tol=tol)
    cold = _solve(solver, p)
    exact = p.exact()
    noise = torch.randn(exact.shape, generator=torch.Generator().manual_seed(9), dtype=F64)
    warm = _solve(solver, p, exact + LOOSE * noise * exact.std())
    assert warm.epochs < cold.epochs
    _assert_converged(p, warm, tol)
    gap = torch.linalg.matrix_norm(warm.solution - cold.solution) / torch.linalg.matrix_norm(exact)
    assert float(gap) <= 2 * p.cond() * tol * math.sqrt(p.B.shape[1])


@pytest.mark.parametrize("warm", [False, True])
def test_epochs_are_counted_exactly(make_solver, counter, warm):
    p = build_problem()
    count = counter(p.system)
    before = p.system.entries
    x0 = p.exact() * (1 + LOOSE) if warm else None
    result = _solve(make_solver(tol=iterative_tol(F64)), p, x0)
    n2 = p.n * p.n
    assert count.entries == p.system.entries - before
    assert result.epochs == count.entries / n2
    epochs = [h[0] for h in result.history]
    assert epochs == sorted(epochs) and (not epochs or epochs[-1] <= result.epochs)


@pytest.mark.parametrize("max_epochs", [1.0, 2.5, 3.7, 7.0])
def test_budget_is_respected(make_solver, counter, max_epochs):
    p = build_problem(noise=0.02)  # ill-conditioned: no solver converges within the budget
    count = counter(p.system)
    result = _solve(make_solver(tol=iterative_tol(F64)), p, max_epochs=max_epochs)
    assert count.entries <= max_epochs * p.n * p.n
    assert result.epochs <= max_epochs
    assert not result.converged


def test_budget_too_small_for_the_setup_computes_nothing_or_raises(make_solver):
    p = build_problem()
    solver = make_solver()
    tiny = 1.0 / (p.n * p.n)
    try:
        result = _solve(solver, p, p.B, max_epochs=tiny)
    except ValueError as e:  # SGD: no room for its final true residual
        assert "max_epochs" in str(e)
        return
    assert result.iterations == 0 and result.epochs == 0.0 and not result.converged
    torch.testing.assert_close(result.solution, p.B, rtol=exact_tol(F64), atol=0.0)


def test_separate_tolerances(make_solver):
    p = build_problem()
    tight = iterative_tol(F64) ** 0.5
    # mean column met from the start (relative residual 1 at u = 0): probes still run
    r = _solve(make_solver(tol=1.0, tol_probes=tight), p)
    assert r.iterations > 0 and r.converged
    assert float(p.relres(r.solution)[1:].mean()) <= tight
    # probes met from the start: the mean column still runs
    r = _solve(make_solver(tol=tight, tol_probes=1.0), p)
    assert r.iterations > 0 and r.converged
    assert float(p.relres(r.solution)[0]) <= tight


def test_max_iterations_and_zero_columns(make_solver):
    p = build_problem()
    r = _solve(make_solver(tol=iterative_tol(F64), max_iterations=3), p)
    assert r.iterations <= 3 and not r.converged
    B = p.B.clone()
    B[:, 2] = 0
    r = make_solver().solve(p.system, B, generator=torch.Generator().manual_seed(0))
    assert torch.all(r.solution[:, 2] == 0)


def test_single_column_reports_nan_probes(make_solver):
    p = build_problem(k=1)
    r = _solve(make_solver(), p)
    assert r.converged and math.isnan(r.residual_norm_probes)
    assert all(math.isnan(h[2]) for h in r.history)


def test_history_tracks_the_residual(make_solver):
    p = build_problem()
    r = _solve(make_solver(tol=iterative_tol(F64)), p)
    assert all(math.isfinite(v) for h in r.history for v in h)
    assert r.history[-1][1] < r.history[0][1] and r.history[-1][2] < r.history[0][2]


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"tol": 0.0}, ValueError, "tol"),
        ({"tol": -1.0}, ValueError, "tol"),
        ({"tol": "a"}, TypeError, "tol"),
        ({"tol_probes": 0.0}, ValueError, "tol_probes"),
        ({"max_iterations": -1}, ValueError, "max_iterations"),
        ({"max_iterations": 1.5}, TypeError, "max_iterations"),
    ],
)
def test_bad_configuration_names_the_argument(make_solver, kwargs, error, name):
    with pytest.raises(error, match=name):
        make_solver(**kwargs)


def test_bad_solve_arguments_name_the_argument(make_solver):
    p = build_problem()
    solver, s, B = make_solver(), p.system, p.B
    g = torch.Generator().manual_seed(0)
    nan = B.clone()
    nan[0, 0] = math.nan
    cases = [
        ((s, B[:-1]), {}, ValueError, "B"),
        ((s, B[:, 0]), {}, ValueError, "B"),
        ((s, B.float()), {}, TypeError, "B"),
        ((s, nan), {}, ValueError, "B"),
        ((s, B, B[:, :2]), {}, ValueError, "x0"),
        ((s, B, B.float()), {}, TypeError, "x0"),
        ((s, B), {"max_epochs": 0.0}, ValueError, "max_epochs"),
        ((s, B), {"max_epochs": -2}, ValueError, "max_epochs"),
        ((s.matmul, B), {}, TypeError, "system"),
        ((s, B.numpy()), {}, TypeError, "B"),
    ]
    for args, kw, error, name in cases:
        with pytest.raises(error, match=name):
            solver.solve(*args, generator=g, **kw)


def test_chunked_backend_gives_the_same_solution(make_solver):
    dense, chunked = (build_problem(backend=b) for b in ("dense", "chunked"))
    tol = iterative_tol(F64)
    a, b = (_solve(make_solver(tol=tol), p) for p in (dense, chunked))
    assert b.converged and a.epochs == pytest.approx(b.epochs, rel=LOOSE)
    gap = torch.linalg.matrix_norm(a.solution - b.solution) / torch.linalg.matrix_norm(a.solution)
    assert float(gap) <= 2 * dense.cond() * tol * math.sqrt(dense.B.shape[1])
