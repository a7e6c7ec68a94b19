"""KernelSolveInfo: the IterationInfo of the kernel-system solvers, and CG on pn.cg's loop."""

from __future__ import annotations

import math

import pytest
import torch
from iterative_support import SOLVERS, build_problem

import pnsolve as pn
from pnsolve._core.info import IterationInfo
from pnsolve.iterative import ConjugateGradients, KernelSolveInfo
from pnsolve.krylov import conjugate_gradient
from pnsolve.testing import iterative_tol

F64 = torch.float64
R = pn.StopReason
PAPER_TOL = 1e-2


def _solve(solver, p, B=None, x0=None, **kw):
    B = p.B if B is None else B
    return solver.solve(p.system, B, x0, generator=torch.Generator().manual_seed(0), **kw)


@pytest.mark.parametrize("warm", [False, True])
def test_info_is_an_iteration_info_with_rows_per_iteration(make_solver, warm):
    p = build_problem()
    x0 = 0.5 * p.exact() if warm else None
    products = p.system.products
    _, info = _solve(make_solver(tol=PAPER_TOL), p, x0=x0)
    assert isinstance(info, IterationInfo) and isinstance(info, KernelSolveInfo)
    assert info.residual_norms.shape == (info.iterations + 1, p.B.shape[1])
    assert info.products == p.system.products - products
    assert info.success == info.converged and info.stop_reason is R.CONVERGED
    for h, row in zip(info.history, info.residual_norms[1:], strict=True):
        assert h[1] == float(row[0]) and h[2] == pytest.approx(float(row[1:].mean()))
    if warm:
        assert info.products >= 1  # the initial residual b − K̂ x0


def test_cg_products_are_its_iterations_and_set_up_products():
    p = build_problem()
    _, info = _solve(ConjugateGradients(tol=PAPER_TOL, preconditioner_rank=10), p, x0=p.B)
    assert info.products == info.iterations + 1  # + the warm start's residual


def test_stop_reasons_name_the_limit(make_solver):
    p = build_problem(noise=0.02)  # ill-conditioned: no solver converges within 2 epochs
    tol = iterative_tol(F64)
    _, info = _solve(make_solver(tol=tol), p, max_epochs=2)
    assert info.stop_reason is R.BUDGET and not info.success
    _, info = _solve(make_solver(tol=tol, max_iterations=2), p)
    assert info.stop_reason is R.MAX_ITERATIONS and info.iterations == 2
    # max_iterations tighter than the budget: the iteration cap names the stop
    _, info = _solve(make_solver(tol=tol, max_iterations=1), p, max_epochs=2)
    assert info.stop_reason is R.MAX_ITERATIONS and info.iterations == 1


def test_zero_right_hand_sides(make_solver):
    p = build_problem()
    U, info = _solve(make_solver(), p, B=torch.zeros_like(p.B))
    assert info.stop_reason is R.ZERO_RHS and info.success and info.iterations == 0
    assert torch.all(U == 0)


def test_a_tolerance_below_attainable_accuracy_stagnates():
    """CG's recursive residual falls below any tolerance; the confirmations on the true
    residual stop making progress at the attainable accuracy."""
    p = build_problem(noise=0.3)
    _, info = _solve(SOLVERS["cg"](tol=1e-17), p, max_epochs=2000)
    assert info.stop_reason is R.STAGNATION and not info.converged
    assert info.iterations < 2000


def test_cg_runs_on_the_loop_of_pn_cg(monkeypatch):
    """One ``cg_core`` run per solve, one more per failed true-residual confirmation
    of a tolerance below √eps, each on recursive residuals (classical PCG)."""
    runs: list[dict] = []
    core = conjugate_gradient.cg_core

    def spy(*args, **kwargs):
        runs.append(kwargs)
        return core(*args, **kwargs)

    monkeypatch.setattr(pn.iterative.cg, "cg_core", spy)
    p = build_problem()
    _, info = _solve(ConjugateGradients(tol=PAPER_TOL), p)
    assert len(runs) == 1 and runs[0]["exact_residuals"] is False
    assert torch.equal(runs[0]["tolerances"], torch.full((4,), PAPER_TOL, dtype=F64))
    runs.clear()
    _, info = _solve(ConjugateGradients(tol=1e-12, tol_probes=1e-10), p)
    assert len(runs) >= 2 and info.converged  # a claim, then its confirmation
    assert runs[0]["tolerances"].tolist() == [1e-12, 1e-10, 1e-10, 1e-10]
    # each confirmation is one product (the true residual), charged to the set-up
    assert info.products == info.iterations + len(runs) - 1
    rank = ConjugateGradients().preconditioner_rank  # its diagonal and columns: set-up too
    assert info.setup_epochs == pytest.approx(info.products - info.iterations + (rank + 1) / p.n)


def test_cg_equals_cg_core_without_residual_replacement():
    """The kernel-system CG is ``cg_core`` on the normalised system, bit for bit."""
    p = build_problem(noise=0.05)
    rank = 20
    U, info = _solve(ConjugateGradients(tol=1e-6, preconditioner_rank=rank, max_iterations=7), p)
    scale = torch.linalg.vector_norm(p.B, dim=0)
    twin = pn.iterative.KernelSystem(p.system.kernel, p.system.X, p.system.noise)
    M = pn.preconditioners.PivotedCholesky(twin, rank)
    X, ref = conjugate_gradient.cg_core(
        twin,
        p.B / scale,
        tolerances=torch.full((4,), 1e-6, dtype=F64),
        maxiter=7,
        M=M,
        exact_residuals=False,
    )
    assert torch.equal(U, X * scale) and info.iterations == ref.iterations == 7
    assert ref.true_residual_checks == 0 and ref.products == 7
    assert not math.isnan(info.residual_norm_probes)
