"""``belief.calibrated``: set by the solver from the policy's ``adaptive`` and any replay."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import pnsolve as pn
from pnsolve.krylov import KrylovBuffer
from pnsolve.testing import exact_tol

P = pn.policies


def _problem(n: int = 10):
    return pn.problems.make_problem(
        "exponential", n, generator=torch.Generator().manual_seed(0), cond=1e2
    )


def _states(policy, iterations: int = 4, problem=None, **kwargs):
    problem = _problem() if problem is None else problem
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(iterations))
    g = torch.Generator().manual_seed(0)
    return list(solver.iterate(problem.A, problem.b, generator=g, **kwargs))


@pytest.mark.parametrize(
    "policy",
    [
        P.Random(),
        P.UnitVector("random"),
        P.UnitVector("schur"),
        P.Lanczos(start="random"),
        P.PivotedCholeskyActions(),
        P.Mixed([P.Random(), P.UnitVector()]),
        P.Custom(
            lambda state, generator: torch.randn(10, generator=generator).double(), adaptive=False
        ),
    ],
    ids=repr,
)
def test_non_adaptive_policies_give_calibrated_beliefs(policy) -> None:
    states = _states(policy)
    assert all(s.belief.calibrated for s in states)


@pytest.mark.parametrize(
    "policy",
    [
        P.CG(),
        P.Lanczos(),
        P.UnitVector("pivot"),
        P.Custom(lambda state: state.residual),
        P.Switch([P.UnitVector(), P.CG()], at=[2]),
        P.Mixed([P.Random(), P.CG()]),
    ],
    ids=repr,
)
def test_adaptive_policies_give_uncalibrated_beliefs_after_the_first_action(policy) -> None:
    states = _states(policy)
    assert states[0].belief.calibrated  # the prior: no action yet, exact
    assert not any(s.belief.calibrated for s in states[1:])


def test_a_replayed_buffer_of_unknown_provenance_ends_calibration() -> None:
    problem = _problem()
    A = pn.linops.as_linop(problem.A)
    problem = SimpleNamespace(A=A, b=problem.b)
    buffer = KrylovBuffer(A)
    pn.ProbabilisticLinearSolver(P.Random(), pn.stopping.MaxIterations(3)).solve(
        A, problem.b, buffer=buffer, generator=torch.Generator().manual_seed(1)
    )
    assert buffer.size == 3
    states = _states(P.Random(), problem=problem, buffer=buffer)
    assert states[0].belief.rank == 3 and not states[0].belief.calibrated
    assert not any(s.belief.calibrated for s in states)


def test_a_buffer_declared_non_adaptive_keeps_calibration() -> None:
    problem = _problem()
    S = torch.randn(10, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    declared = SimpleNamespace(actions=S, images=problem.A @ S, adaptive=False)
    states = _states(P.Random(), buffer=declared)
    assert states[0].belief.rank == 3 and all(s.belief.calibrated for s in states)
    undeclared = SimpleNamespace(actions=S, images=problem.A @ S)
    assert not _states(P.Random(), buffer=undeclared)[0].belief.calibrated


def test_an_empty_buffer_replays_nothing() -> None:
    problem = _problem()
    A = pn.linops.as_linop(problem.A)
    buffer = KrylovBuffer(A)
    states = _states(P.Random(), problem=SimpleNamespace(A=A, b=problem.b), buffer=buffer)
    assert all(s.belief.calibrated for s in states)


def test_recycled_policy_follows_its_declaration() -> None:
    problem = _problem()
    A = pn.linops.as_linop(problem.A)
    buffer = KrylovBuffer(A)
    pn.ProbabilisticLinearSolver(P.Random(), pn.stopping.MaxIterations(3)).solve(
        A, problem.b, buffer=buffer, generator=torch.Generator().manual_seed(1)
    )
    fresh = _problem()
    assert not _states(P.Recycled(buffer), iterations=3, problem=fresh)[-1].belief.calibrated
    declared = P.Recycled(buffer, adaptive=False)
    assert _states(declared, iterations=3, problem=fresh)[-1].belief.calibrated


def test_a_general_prior_keeps_the_flag_and_direct_construction_claims_nothing() -> None:
    problem = _problem()
    solver = pn.ProbabilisticLinearSolver(P.Random(), pn.stopping.MaxIterations(3), prior=0.5)
    belief, _ = solver.solve(problem.A, problem.b, generator=torch.Generator().manual_seed(0))
    assert belief.calibrated
    plain = pn.beliefs.GaussianSolutionBelief(
        belief.A, belief.b, belief.mean, belief.prior, belief.V, belief.T, belief.W
    )
    assert not plain.calibrated
    assert "calibrated=True" in repr(belief)


def test_expected_squared_residual_is_tr_of_A_sigma_A() -> None:
    problem = _problem()
    solver = pn.ProbabilisticLinearSolver(P.CG(), pn.stopping.MaxIterations(4))
    belief, _ = solver.solve(problem.A, problem.b)
    A = problem.A.to_dense()
    Sigma = torch.linalg.inv(A) - belief.inverse_approx.to_dense()
    expected = torch.trace(A @ Sigma @ A)
    got = belief.expected_squared_residual()
    assert abs(float(got - expected)) <= exact_tol(A.dtype, 10) * 1e3 * float(torch.trace(A))
    general = pn.ProbabilisticLinearSolver(P.CG(), pn.stopping.MaxIterations(2), prior=1.0)
    with pytest.raises(ValueError, match="inverse prior"):
        general.solve(problem.A, problem.b)[0].expected_squared_residual()
