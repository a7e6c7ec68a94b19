"""Switch and Mixed: which policy acts when, and per-policy memories."""

from __future__ import annotations

import pytest
import torch
from policy_helpers import actions, make_problem, run

import pnsolve as pn

P = pn.policies


class Recorder:
    """A Custom action function that records the iterations at which it was called."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, state: pn.SolverState) -> torch.Tensor:
        self.calls.append(state.iteration)
        return state.residual


def test_switch_uses_each_policy_from_its_iteration_on() -> None:
    problem = make_problem(12)
    first, third = Recorder(), Recorder()
    policy = P.Switch([P.Custom(first), P.UnitVector(), P.Custom(third)], at=[2, 5])
    assert [policy.active(i) for i in range(7)] == [0, 0, 1, 1, 1, 2, 2]
    blocks = actions(policy, problem.A, problem.b, 7)
    assert first.calls == [0, 1] and third.calls == [5, 6]
    # the unit-vector policy starts its own sequence at index 0 when it takes over
    assert [int(S.argmax()) for S in blocks[2:5]] == [0, 1, 2]
    A = pn.testing.CountingOperator(problem.A)
    _, info = run(policy, A, problem.b, 7)
    assert A.matmat_calls == info.products == 7


def test_mixed_memories_of_unchosen_policies_stay_unchanged() -> None:
    problem = make_problem(20)
    recorder = Recorder()
    policy = P.Mixed([P.UnitVector(), P.Custom(recorder)], weights=[2.0, 1.0])
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(12))
    states = list(solver.iterate(problem.A, problem.b, generator=torch.Generator().manual_seed(4)))
    unit_iters = [s.iteration - 1 for s in states[1:] if int((s.action != 0).sum()) == 1]
    assert sorted(unit_iters + recorder.calls) == list(range(12))
    assert unit_iters and recorder.calls  # both acted with this seed
    unit_indices = [int(states[i + 1].action.argmax()) for i in unit_iters]
    assert unit_indices == list(range(len(unit_iters)))  # no index skipped in between
    chosen = states[-1].policy_memory[0].chosen
    assert chosen.tolist() == unit_indices


def test_mixed_is_reproducible_and_follows_weights() -> None:
    problem = make_problem(12)

    def pattern(seed: int, weights) -> list[int]:
        rec = Recorder()
        run(P.Mixed([P.CG(), P.Custom(rec)], weights), problem.A, problem.b, 10, seed=seed)
        return rec.calls

    assert pattern(1, [1.0, 1.0]) == pattern(1, [1.0, 1.0])
    assert pattern(1, [1.0, 1.0]) != pattern(2, [1.0, 1.0])
    assert pattern(1, [1.0, 0.0]) == [] and pattern(1, [0, 3]) == list(range(10))


def test_bad_arguments() -> None:
    cg = P.CG()
    with pytest.raises(TypeError, match="policies"):
        P.Switch(cg, at=[])
    with pytest.raises(TypeError, match=r"policies\[1\]"):
        P.Switch([cg, "cg"], at=[1])
    with pytest.raises(ValueError, match="policies"):
        P.Mixed([])
    with pytest.raises(ValueError, match="at"):
        P.Switch([cg, cg], at=[])
    with pytest.raises(ValueError, match="strictly increasing"):
        P.Switch([cg, cg, cg], at=[3, 3])
    with pytest.raises(ValueError, match=r"at\[0\]"):
        P.Switch([cg, cg], at=[0])
    with pytest.raises(ValueError, match="weights"):
        P.Mixed([cg, cg], weights=[1.0])
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        P.Mixed([cg, cg], weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="positive sum"):
        P.Mixed([cg, cg], weights=[0, 0])
    problem = make_problem(5)
    with pytest.raises(ValueError, match="generator="):
        run(P.Mixed([cg, cg]), problem.A, problem.b, 2, seed=None)
    with pytest.raises(ValueError, match="generator="):  # a stochastic sub-policy says so too
        run(P.Switch([cg, P.Random()], at=[1]), problem.A, problem.b, 2, seed=None)


def test_repr() -> None:
    assert repr(P.Switch([P.CG(), P.Lanczos()], at=[3])) == (
        "Switch(policies=[CG(preconditioner=None), Lanczos()], at=[3])"
    )
    assert repr(P.Mixed([P.Lanczos()])) == "Mixed(policies=[Lanczos()], weights=[1.0])"
