"""Pivoted-Cholesky actions: greedy pivots, factor columns, subset-of-regressors span."""

from __future__ import annotations

import pytest
import torch
from policy_helpers import actions, make_problem, run

import pnsolve as pn
from pnsolve.testing import exact_tol, krylov_tol
from pnsolve.testing.device import suite_device

P = pn.policies


def test_actions_are_the_pivoted_cholesky_factor_columns() -> None:
    problem = make_problem(15, cond=100.0, seed=4)
    S = torch.cat(actions(P.PivotedCholeskyActions(), problem.A, problem.b, 6), dim=1)
    reference = pn.preconditioners.PivotedCholesky(problem.A, rank=6, tol=0.0)
    tol = exact_tol(S.dtype, 15) * float(problem.A.to_dense().abs().max())
    assert float((S - reference.L).abs().max()) <= tol


def test_belief_is_the_galerkin_solution_on_the_pivot_columns() -> None:
    """span(actions) = span(A E_I): the subset-of-regressors space of the pivots."""
    problem = make_problem(15, cond=100.0, seed=4)
    A, b = problem.A.to_dense(), problem.b
    belief, info = run(P.PivotedCholeskyActions(block_size=2), problem.A, b, 3, seed=None)
    assert info.products == 3 and belief.rank == 6 and belief.calibrated
    pivots = pn.preconditioners.PivotedCholesky(problem.A, rank=6, tol=0.0).pivots
    S = A[:, pivots]
    x = S @ torch.linalg.solve(S.mT @ A @ S, S.mT @ b)
    cond = float(torch.linalg.cond(S.mT @ A @ S))
    assert float((belief.mean - x).norm() / x.norm()) <= krylov_tol(b.dtype, cond)


def test_blocks_equal_single_steps_and_the_factorisation_completes() -> None:
    problem = make_problem(12, cond=100.0, seed=5)
    one = torch.cat(actions(P.PivotedCholeskyActions(), problem.A, problem.b, 12), dim=1)
    three = torch.cat(
        actions(P.PivotedCholeskyActions(block_size=3), problem.A, problem.b, 4), dim=1
    )
    assert torch.allclose(one, three, atol=exact_tol(one.dtype, 12))
    belief, info = run(P.PivotedCholeskyActions(block_size=5), problem.A, problem.b, 10)
    assert info.stop_reason is pn.StopReason.BREAKDOWN and info.iterations == 3
    err = (belief.mean - problem.x_true).norm() / problem.x_true.norm()
    assert float(err) <= krylov_tol(torch.float64, 100.0)


def test_no_hidden_products_and_structure_is_required() -> None:
    problem = make_problem(8)
    counting = pn.testing.CountingOperator(pn.linops.as_linop(problem.A))
    _, info = run(P.PivotedCholeskyActions(), counting, problem.b, 4)
    assert counting.products == info.products == 4
    assert counting.rows_accessed == 4 and counting.diagonal_calls >= 1
    closure = pn.linops.Closure(
        lambda X: problem.A @ X,
        (8, 8),
        dtype=problem.b.dtype,
        is_symmetric=True,
        device=suite_device(),
    )
    with pytest.raises(pn.MissingStructureError, match="PivotedCholeskyActions needs the diagonal"):
        run(P.PivotedCholeskyActions(), closure, problem.b, 2)


def test_arguments_adaptive_and_repr() -> None:
    with pytest.raises(ValueError, match="block_size"):
        P.PivotedCholeskyActions(block_size=0)
    with pytest.raises(ValueError, match="tol"):
        P.PivotedCholeskyActions(tol=-1.0)
    assert not P.PivotedCholeskyActions().adaptive
    assert repr(P.PivotedCholeskyActions(2)) == "PivotedCholeskyActions(block_size=2)"
    assert (
        repr(P.PivotedCholeskyActions(tol=0.1)) == "PivotedCholeskyActions(block_size=1, tol=0.1)"
    )


def test_kernel_system_matrix_free() -> None:
    """Rows of a matrix-free kernel operator; the float32 belief stays finite."""
    X = torch.linspace(0, 1, 40, dtype=torch.float32).unsqueeze(-1)
    k = pn.kernels.RBF(lengthscale=0.2)
    A = k.linop(X, backend="chunked") + pn.linops.ScaledIdentity(40, 0.1, dtype=X.dtype)
    b = torch.sin(6 * X[:, 0])
    belief, info = run(P.PivotedCholeskyActions(), A, b, 10)
    assert info.products == 10 and belief.mean.dtype == torch.float32
    assert bool(torch.isfinite(belief.mean).all())
