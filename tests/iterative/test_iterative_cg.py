"""ConjugateGradients: classical PCG iterates, one epoch per iteration, budgets, set-up."""

from __future__ import annotations

import math

import pytest
import torch
from iterative_support import build_problem

import pnsolve as pn
from pnsolve.iterative import ConjugateGradients
from pnsolve.preconditioners import PivotedCholesky
from pnsolve.testing import exact_tol, iterative_tol, krylov_tol

F64 = torch.float64
#: The paper's τ: above √eps, so no confirmation products and the cost formulas are exact.
PAPER_TOL = 1e-2
RANK = 20
STEPS = 6


def test_each_iteration_costs_one_epoch_after_the_preconditioner(counter):
    p = build_problem()
    count = counter(p.system)
    _, r = ConjugateGradients(tol=PAPER_TOL, preconditioner_rank=RANK).solve(p.system, p.B)
    n = p.n
    setup = (RANK + 1) * n  # the diagonal and one column per pivot
    assert count.entries == r.iterations * n * n + setup
    assert r.setup_epochs == pytest.approx(setup / (n * n), rel=exact_tol(F64))
    entries = [round(h[0] * n * n) for h in r.history]
    assert entries == [setup + (i + 1) * n * n for i in range(r.iterations)]


def test_plain_cg_costs_exactly_its_iterations():
    p = build_problem()
    _, r = ConjugateGradients(tol=PAPER_TOL, preconditioner_rank=0).solve(p.system, p.B)
    assert r.converged and r.epochs == r.iterations and r.setup_epochs == 0


@pytest.mark.parametrize("rank", [0, RANK])
@pytest.mark.parametrize("warm", [False, True])
def test_iterates_are_those_of_classical_pcg(rank, warm):
    """Column by column, iterate m equals iterate m of ``pnsolve.cg`` with the same ``M``."""
    p = build_problem(noise=0.05)
    x0 = 0.5 * p.B if warm else None
    A = p.system  # a LinearOperator
    M = PivotedCholesky(A, rank) if rank else None
    tol = krylov_tol(F64, p.cond())
    runs = [
        ConjugateGradients(
            tol=iterative_tol(F64), preconditioner_rank=rank, max_iterations=m
        ).solve(p.system, p.B, x0)
        for m in range(1, STEPS + 1)
    ]
    for j in range(p.B.shape[1]):
        ref: list[torch.Tensor] = []
        pn.cg(
            A,
            p.B[:, j],
            None if x0 is None else x0[:, j],
            rtol=0.0,
            maxiter=STEPS,
            M=M,
            callback=ref.append,
        )
        assert len(ref) == STEPS
        for m, (U, r) in enumerate(runs, start=1):
            assert r.iterations == m and not r.converged
            err = torch.linalg.vector_norm(U[:, j] - ref[m - 1])
            assert float(err / torch.linalg.vector_norm(ref[m - 1])) <= tol


@pytest.mark.parametrize("max_epochs", [1.0, 3.0, 3.7])
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("rank", [0, RANK])
def test_budget_T_runs_floor_T_iterations(counter, max_epochs, warm, rank):
    """Algorithm 1 caps iterations only: the preconditioner and a warm start's residual
    are set-up, counted in ``epochs`` and ``setup_epochs`` but not in the budget."""
    p = build_problem(noise=0.02)  # ill-conditioned: not converged within the budget
    count = counter(p.system)
    n2 = p.n * p.n
    x0 = p.B if warm else None
    solver = ConjugateGradients(tol=iterative_tol(F64), preconditioner_rank=rank)
    _, r = solver.solve(p.system, p.B, x0, max_epochs=max_epochs)
    assert r.iterations == math.floor(max_epochs) and not r.converged
    setup = (n2 if warm else 0) + ((RANK + 1) * p.n if rank else 0)
    assert count.entries == r.iterations * n2 + setup
    assert r.epochs == count.entries / n2
    assert r.setup_epochs == pytest.approx(setup / n2, rel=exact_tol(F64))
    assert r.epochs - r.setup_epochs <= max_epochs * (1 + exact_tol(F64))  # float rounding
    assert (r.setup_epochs > 0) == (warm or rank > 0)


@pytest.mark.parametrize("max_epochs", [0.5, 0.999])
def test_budget_below_one_iteration_raises(max_epochs):
    p = build_problem()
    with pytest.raises(ValueError, match="max_epochs"):
        ConjugateGradients().solve(p.system, p.B, max_epochs=max_epochs)
    with pytest.raises(ValueError, match="max_epochs"):
        ConjugateGradients().solve(p.system, p.B, p.B, max_epochs=max_epochs)


def test_no_preconditioner_is_built_when_no_iteration_runs(counter):
    p = build_problem()
    count = counter(p.system)
    _, r = ConjugateGradients(tol=iterative_tol(F64)).solve(p.system, p.B, p.exact())
    assert r.iterations == 0 and r.converged
    assert count.entries == p.n * p.n and r.setup_epochs == r.epochs == 1.0


def test_preconditioner_saves_iterations_on_an_ill_conditioned_system():
    p = build_problem(noise=1e-3)
    tol = iterative_tol(F64)
    _, plain = ConjugateGradients(tol=tol, preconditioner_rank=0).solve(p.system, p.B)
    U_pc, pc = ConjugateGradients(tol=tol, preconditioner_rank=2 * RANK).solve(p.system, p.B)
    assert pc.converged and plain.converged
    assert pc.iterations < plain.iterations
    assert float(p.relres(U_pc).max()) <= tol * p.B.shape[1]


def test_converged_columns_are_frozen():
    p = build_problem()
    # the mean column meets tol = 1 at u = 0 and is never touched
    U_r, r = ConjugateGradients(tol=1.0, tol_probes=PAPER_TOL).solve(p.system, p.B)
    assert r.iterations > 0
    assert torch.all(U_r[:, 0] == 0)


def test_rank_is_capped_below_n():
    p = build_problem(n=30)
    _, r = ConjugateGradients(tol=iterative_tol(F64), preconditioner_rank=100).solve(p.system, p.B)
    assert r.converged


@pytest.mark.parametrize(("rank", "error"), [(-1, ValueError), (2.0, TypeError), (None, TypeError)])
def test_bad_rank_names_the_argument(rank, error):
    with pytest.raises(error, match="preconditioner_rank"):
        ConjugateGradients(preconditioner_rank=rank)


def test_generator_is_optional_but_typed():
    p = build_problem()
    with pytest.raises(TypeError, match="generator"):
        ConjugateGradients().solve(p.system, p.B, generator=0)
