"""Custom policies: a user function of the state, with or without the generator."""

from __future__ import annotations

import itertools

import pytest
import torch
from policy_helpers import actions, make_problem, run

import pnsolve as pn
from pnsolve.testing import krylov_tol

P = pn.policies


def largest_residual_entries(state: pn.SolverState) -> torch.Tensor:
    """Observe the two coordinates with the largest residual."""
    r = state.residual
    idx = r.abs().topk(2).indices
    return torch.eye(r.shape[0], dtype=r.dtype, device=r.device)[:, idx]


def test_targets_largest_residual_entries() -> None:
    problem = make_problem(12, seed=3)
    solver = pn.ProbabilisticLinearSolver(
        P.Custom(largest_residual_entries), pn.stopping.MaxIterations(6)
    )
    states = list(solver.iterate(problem.A, problem.b))
    for before, after in itertools.pairwise(states):
        targeted = after.action.argmax(dim=0)
        assert set(targeted.tolist()) == set(before.residual.abs().topk(2).indices.tolist())
        # observed coordinates are fit exactly: their residual vanishes
        assert float(after.residual[targeted].abs().max()) <= krylov_tol(
            torch.float64, 100.0
        ) * float(problem.b.norm())
    err = (states[-1].belief.mean - problem.x_true).norm() / problem.x_true.norm()
    assert float(err) <= krylov_tol(torch.float64, 100.0)  # 6 blocks of 2: exact


def test_generator_is_passed_when_asked_for() -> None:
    problem = make_problem(10)
    seen = []

    def keyword(state, generator=None):
        seen.append(generator)
        return torch.randn(10, dtype=state.residual.dtype, generator=generator)

    def positional(state, g):
        seen.append(g)
        return state.residual

    def varargs(*args):
        seen.append(args[1])
        return args[0].residual

    for fn in (keyword, positional, varargs):
        seen.clear()
        g = torch.Generator().manual_seed(0)
        pn.ProbabilisticLinearSolver(P.Custom(fn), pn.stopping.MaxIterations(2)).solve(
            problem.A, problem.b, generator=g
        )
        assert seen == [g, g]
    a = actions(P.Custom(keyword), problem.A, problem.b, 3, seed=5)
    b = actions(P.Custom(keyword), problem.A, problem.b, 3, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))

    def optional_second(state, scale=2.0):
        return scale * state.residual

    (S,) = actions(P.Custom(optional_second), problem.A, problem.b, 1)
    assert torch.equal(S[:, 0], 2.0 * problem.b)  # called as fn(state): default kept
    (S,) = actions(
        P.Custom(lambda s, *a: s.residual, pass_generator=False), problem.A, problem.b, 1
    )
    assert torch.equal(S[:, 0], problem.b)


def test_dependent_actions_give_breakdown_without_nan() -> None:
    problem = make_problem(8)
    fixed = torch.ones(8, dtype=torch.float64)
    belief, info = run(P.Custom(lambda state: fixed), problem.A, problem.b, 5)
    assert info.iterations == 1 and info.stop_reason is pn.StopReason.BREAKDOWN
    assert bool(torch.isfinite(belief.mean).all()) and belief.rank == 1


def test_bad_return_values_name_the_policy_and_iteration() -> None:
    problem = make_problem(8)

    def wrong_shape(state):
        n = state.residual.shape[0]
        return state.residual if state.iteration < 2 else torch.zeros(n - 1, dtype=torch.float64)

    with pytest.raises(ValueError, match=r"Custom\(fn=.*wrong_shape\) at iteration 2"):
        run(P.Custom(wrong_shape), problem.A, problem.b, 5)
    with pytest.raises(TypeError, match=r"Custom\(fn=.*\) at iteration 0 must be a torch.Tensor"):
        run(P.Custom(lambda state: state.residual.tolist()), problem.A, problem.b, 5)
    inner = P.Switch([P.CG(), P.Custom(wrong_shape)], at=[1])
    with pytest.raises(ValueError, match=r"Custom.*at iteration 2"):  # named inside composites too
        run(inner, problem.A, problem.b, 5)
    with pytest.raises(TypeError, match="dtype"):  # the solver checks dtypes
        run(P.Custom(lambda state: state.residual.float()), problem.A, problem.b, 5)


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="fn"):
        P.Custom("residual")
    with pytest.raises(TypeError, match="pass_generator"):
        P.Custom(lambda s: s.residual, pass_generator=1)
