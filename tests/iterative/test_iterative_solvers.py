"""Properties every kernel-system solver shares (CG, alternating projections, SGD)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from iterative_support import KERNELS, SOLVERS, build_problem, iteration_cap, iteration_entries

import pnsolve as pn
from pnsolve.iterative import KernelSolveInfo, _common
from pnsolve.testing import exact_tol, iterative_tol, krylov_tol

F64, F32 = torch.float64, torch.float32
#: Relative size of the perturbations that make warm starts (a problem parameter).
PERTURBATION = 1e-2
#: The paper's τ (a solver setting, not a test tolerance).
PAPER_TOL = 1e-2
NOISES = (0.3, 1.0)
#: Budget of the tight-tolerance convergence test: alternating projections on smooth
#: kernels need about 1200 epochs to reach 1e-10, beyond the default cap of 1000.
CONVERGENCE_EPOCHS = 2000


def _solve(solver, p, x0=None, seed=0, **kw) -> tuple[torch.Tensor, KernelSolveInfo]:
    return solver.solve(p.system, p.B, x0, generator=torch.Generator().manual_seed(seed), **kw)


def _assert_converged(p, U, result, tol, tol_probes=None):
    """TRUE residuals meet the tolerances and the reported norms are the true ones."""
    tol_probes = tol if tol_probes is None else tol_probes
    relres = p.relres(U)
    # reported norms = true norms, up to the rounding of the residual itself; the solver
    # stops on its reported norm, so the true one meets the tolerance up to that slack
    slack = krylov_tol(p.B.dtype, p.cond())
    assert result.converged
    assert float(relres[0]) <= tol + slack
    assert float(relres[1:].mean()) <= tol_probes + slack
    assert result.residual_norm_mean == pytest.approx(float(relres[0]), abs=slack)
    assert result.residual_norm_probes == pytest.approx(float(relres[1:].mean()), abs=slack)


@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_converges_to_the_direct_solution(make_solver, kernel, noise, dtype):
    p = build_problem(kernel=kernel, noise=noise, dtype=dtype)
    tol = iterative_tol(dtype)
    U, result = _solve(make_solver(tol=tol), p, max_epochs=CONVERGENCE_EPOCHS)
    _assert_converged(p, U, result, tol)
    exact = p.exact()
    err = torch.linalg.matrix_norm(U.double() - exact) / torch.linalg.matrix_norm(exact)
    assert float(err) <= p.cond() * tol * math.sqrt(p.B.shape[1])
    assert U.dtype == dtype and U.shape == p.B.shape
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
        U, result = _solve(make(), p, seed=seed)
        relres = p.relres(U)
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
    U, result = _solve(make_solver(tol=tol), p, x0)
    assert result.iterations <= 1
    _assert_converged(p, U, result, tol)


def test_warm_start_near_the_solution_is_cheaper_and_agrees(make_solver):
    p = build_problem()
    tol = iterative_tol(F64)
    solver = make_solver(tol=tol)
    Uc, cold = _solve(solver, p)
    exact = p.exact()
    noise = torch.randn(exact.shape, generator=torch.Generator().manual_seed(9), dtype=F64)
    Uw, warm = _solve(solver, p, exact + PERTURBATION * noise * exact.std())
    assert warm.epochs < cold.epochs
    _assert_converged(p, Uw, warm, tol)
    gap = torch.linalg.matrix_norm(Uw - Uc) / torch.linalg.matrix_norm(exact)
    assert float(gap) <= 2 * p.cond() * tol * math.sqrt(p.B.shape[1])


@pytest.mark.parametrize("warm", [False, True])
def test_epochs_are_counted_exactly(make_solver, counter, warm):
    p = build_problem()
    count = counter(p.system)
    before = p.system.entries
    x0 = p.exact() * (1 + PERTURBATION) if warm else None
    solver = make_solver(tol=iterative_tol(F64))
    _, result = _solve(solver, p, x0)
    n2 = p.n * p.n
    assert count.entries == p.system.entries - before
    assert result.epochs == count.entries / n2
    iterating = iteration_entries(solver, count, result.iterations, p.n)
    setup = count.entries - iterating
    assert result.setup_epochs == pytest.approx(setup / n2, rel=exact_tol(F64))
    if warm:
        assert result.setup_epochs >= 1.0  # the initial residual
    epochs = [h[0] for h in result.history]
    assert epochs == sorted(epochs) and (not epochs or epochs[-1] <= result.epochs)


@pytest.mark.parametrize("max_epochs", [1.0, 2.5, 3.7, 7.0])
@pytest.mark.parametrize("warm", [False, True])
def test_budget_caps_the_iterations(make_solver, counter, max_epochs, warm):
    """Algorithms 1–3: ``⌊T⌋`` CG iterations, ``⌊T·n/b⌋`` AP/SGD iterations; set-up
    work is counted exactly but outside the budget."""
    p = build_problem(noise=0.02)  # ill-conditioned: no solver converges within the budget
    count = counter(p.system)
    x0 = p.B if warm else None
    solver = make_solver(tol=iterative_tol(F64))
    _, result = _solve(solver, p, x0, max_epochs=max_epochs)
    n2 = p.n * p.n
    assert result.iterations == iteration_cap(solver, p.n, max_epochs)
    assert not result.converged
    iterating = iteration_entries(solver, count, result.iterations, p.n)
    assert iterating <= max_epochs * n2
    assert result.epochs == count.entries / n2
    setup = (count.entries - iterating) / n2
    assert result.setup_epochs == pytest.approx(setup, rel=exact_tol(F64))
    # (both are floats: their difference is exact only up to rounding)
    assert result.epochs - result.setup_epochs <= max_epochs * (1 + exact_tol(F64))
    if warm:
        assert result.setup_epochs >= 1.0


def test_budget_too_small_for_one_iteration_raises(make_solver):
    p = build_problem()
    solver = make_solver()
    if isinstance(solver, pn.iterative.ConjugateGradients):
        smallest = 1.0  # one iteration
    else:  # b/n: one block or batch
        smallest = getattr(solver, "block_size", getattr(solver, "batch_size", None)) / p.n
    assert iteration_cap(solver, p.n, smallest) == 1
    for x0 in (None, p.B):
        with pytest.raises(ValueError, match="max_epochs"):
            _solve(solver, p, x0, max_epochs=0.99 * smallest)
        assert _solve(solver, p, x0, max_epochs=smallest)[1].iterations == 1


def test_default_cap_without_budget_or_iteration_cap(make_solver, monkeypatch):
    assert pn.iterative.DEFAULT_MAX_EPOCHS == 1000
    monkeypatch.setattr(_common, "DEFAULT_MAX_EPOCHS", 2)
    p = build_problem(noise=0.02)
    solver = make_solver(tol=iterative_tol(F64))
    _, result = _solve(solver, p)
    assert result.iterations == iteration_cap(solver, p.n, 2) and not result.converged
    # an explicit max_iterations replaces the default cap
    many = 3 * iteration_cap(solver, p.n, 2)
    _, result = _solve(make_solver(tol=iterative_tol(F64), max_iterations=many), p)
    assert result.iterations == many


def test_zero_column_with_a_warm_start(make_solver):
    """A zero right-hand side with a nonzero ``x0``: its solution is exactly zero."""
    p = build_problem()
    B = p.B.clone()
    B[:, 2] = 0
    x0 = torch.randn(B.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    tol = PAPER_TOL
    U, result = make_solver(tol=tol).solve(
        p.system, B, x0, generator=torch.Generator().manual_seed(0)
    )
    assert result.converged and torch.all(U[:, 2] == 0)
    R = B - p.K @ U
    relres = torch.linalg.vector_norm(R, dim=0) / torch.linalg.vector_norm(p.B, dim=0)
    assert float(relres[0]) <= tol and float(relres[1:].mean()) <= tol


def test_separate_tolerances(make_solver):
    p = build_problem()
    tight = iterative_tol(F64) ** 0.5
    # mean column met from the start (relative residual 1 at u = 0): probes still run
    U, r = _solve(make_solver(tol=1.0, tol_probes=tight), p)
    assert r.iterations > 0 and r.converged
    assert float(p.relres(U)[1:].mean()) <= tight
    # probes met from the start: the mean column still runs
    U, r = _solve(make_solver(tol=tight, tol_probes=1.0), p)
    assert r.iterations > 0 and r.converged
    assert float(p.relres(U)[0]) <= tight


def test_max_iterations_and_zero_columns(make_solver):
    p = build_problem()
    U, r = _solve(make_solver(tol=iterative_tol(F64), max_iterations=3), p)
    assert r.iterations <= 3 and not r.converged
    B = p.B.clone()
    B[:, 2] = 0
    U, r = make_solver().solve(p.system, B, generator=torch.Generator().manual_seed(0))
    assert torch.all(U[:, 2] == 0)


def test_single_column_reports_nan_probes(make_solver):
    p = build_problem(k=1)
    _, r = _solve(make_solver(), p)
    assert r.converged and math.isnan(r.residual_norm_probes)
    assert all(math.isnan(h[2]) for h in r.history)


def test_history_tracks_the_residual(make_solver):
    p = build_problem()
    _, r = _solve(make_solver(tol=iterative_tol(F64)), p)
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
    (Ua, a), (Ub, b) = (_solve(make_solver(tol=tol), p) for p in (dense, chunked))
    # the backends round differently: a tolerance test may flip one iteration
    assert b.converged and abs(a.iterations - b.iterations) <= 1
    gap = torch.linalg.matrix_norm(Ua - Ub) / torch.linalg.matrix_norm(Ua)
    assert float(gap) <= 2 * dense.cond() * tol * math.sqrt(dense.B.shape[1])


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("warm", [False, True])
def test_inputs_are_left_untouched(make_solver, k, warm):
    """``B`` and ``x0`` are read only, also with one column (whose two memory layouts
    coincide: a residual "copied" into the solvers' column-major layout by
    ``.contiguous()`` aliased ``B`` there, and SGD's residual updates corrupted it)."""
    p = build_problem(k=k)
    B = p.B.clone()
    x0 = 0.1 * torch.randn(B.shape, generator=torch.Generator().manual_seed(3), dtype=F64)
    x0_copy = x0.clone()
    _, result = _solve(make_solver(), p, x0 if warm else None)
    assert result.converged
    assert torch.equal(p.B, B) and torch.equal(x0, x0_copy)


def test_column_major_always_copies():
    for shape in [(7, 1), (7, 3), (1, 1)]:
        R = torch.randn(shape, dtype=F64)
        C = _common.column_major(R)
        assert torch.equal(C, R) and C.data_ptr() != R.data_ptr()
        assert C.mT.is_contiguous()
