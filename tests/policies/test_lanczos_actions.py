"""Lanczos actions: orthonormal Krylov basis; under the inverse prior the mean is CG's."""

from __future__ import annotations

import itertools

import pytest
import torch
from policy_helpers import actions, make_problem, run

import pnsolve as pn
from pnsolve.testing import exact_tol, krylov_tol

P = pn.policies


def test_mean_equals_cg_iterates() -> None:
    cond = 10.0
    problem = make_problem(50, cond=cond, seed=3)
    A, b = problem.A, problem.b
    cg_iterates: list[torch.Tensor] = []
    pn.cg(A, b, rtol=0.0, maxiter=10, callback=cg_iterates.append)
    solver = pn.ProbabilisticLinearSolver(P.Lanczos(), pn.stopping.MaxIterations(10))
    means = [s.belief.mean for s in solver.iterate(A, b)][1:]
    assert len(means) == len(cg_iterates) == 10
    tol = krylov_tol(b.dtype, cond)
    for x_pn, x_cg in zip(means, cg_iterates, strict=True):
        assert float((x_pn - x_cg).norm() / x_cg.norm()) <= tol


def test_actions_are_an_orthonormal_krylov_basis() -> None:
    problem = make_problem(30, cond=10.0, seed=1)
    A, b = problem.A, problem.b
    Q = torch.cat(actions(P.Lanczos(), A, b, 6), dim=1)
    assert torch.allclose(Q.mT @ Q, torch.eye(6, dtype=Q.dtype), atol=exact_tol(Q.dtype, 30))
    assert torch.allclose(Q[:, 0], b / b.norm(), atol=exact_tol(Q.dtype, 30))
    K = torch.stack([torch.linalg.matrix_power(A.to_dense(), j) @ b for j in range(6)], dim=1)
    K = torch.linalg.qr(K).Q
    # same subspace: the projector onto span(K) leaves Q unchanged
    assert float((K @ (K.mT @ Q) - Q).norm()) <= krylov_tol(Q.dtype, 10.0)


def test_invariant_krylov_space_gives_exact_mean_then_breakdown() -> None:
    spectrum = torch.tensor([3.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    problem = pn.problems.spd_from_spectrum(spectrum, generator=g)
    belief, info = run(P.Lanczos(), problem.A, problem.b, 8)
    assert info.stop_reason is pn.StopReason.BREAKDOWN and info.iterations == 3
    assert bool(torch.isfinite(belief.mean).all())
    err = (belief.mean - problem.x_true).norm() / problem.x_true.norm()
    assert float(err) <= krylov_tol(torch.float64, 3.0)


def test_restarts_from_residual_after_another_policy() -> None:
    problem = make_problem(20, cond=10.0)
    policy = P.Switch([P.UnitVector(), P.Lanczos()], at=[2])
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(4))
    states = list(solver.iterate(problem.A, problem.b))
    r2 = states[2].residual
    assert torch.allclose(states[3].action[:, 0], r2 / r2.norm(), atol=exact_tol(r2.dtype, 20))


def test_problinsolve_by_name_and_dtype() -> None:
    problem = make_problem(16, cond=10.0, dtype=torch.float32)
    belief, info = pn.problinsolve(problem.A, problem.b, policy="lanczos", rtol=1e-4)
    assert info.converged and belief.mean.dtype == torch.float32
    assert repr(P.Lanczos()) == "Lanczos()"


# ---------------------------------------------------------------- non-adaptive starts
def _krylov_basis(A: torch.Tensor, v: torch.Tensor, k: int) -> torch.Tensor:
    K = torch.stack([torch.linalg.matrix_power(A, j) @ v for j in range(k)], dim=1)
    return torch.linalg.qr(K).Q


def test_random_start_is_drawn_from_the_generator_and_spans_its_krylov_space() -> None:
    problem = make_problem(30, cond=10.0, seed=1)
    A, b = problem.A, problem.b
    Q = torch.cat(actions(P.Lanczos(start="random"), A, b, 6, seed=4), dim=1)
    v = torch.randn(30, generator=torch.Generator().manual_seed(4), dtype=b.dtype)
    assert torch.allclose(Q[:, 0], v / v.norm(), atol=exact_tol(Q.dtype, 30))
    assert torch.allclose(Q.mT @ Q, torch.eye(6, dtype=Q.dtype), atol=exact_tol(Q.dtype, 30))
    K = _krylov_basis(A.to_dense(), v, 6)
    assert float((K @ (K.mT @ Q) - Q).norm()) <= krylov_tol(Q.dtype, 10.0)
    again = torch.cat(actions(P.Lanczos(start="random"), A, b, 6, seed=4), dim=1)
    assert torch.equal(Q, again)  # reproducible from the generator
    other = torch.cat(actions(P.Lanczos(start="random"), A, b, 6, seed=5), dim=1)
    assert not torch.allclose(Q, other)


def test_tensor_start_gives_the_galerkin_solution_on_its_krylov_space() -> None:
    problem = make_problem(20, cond=10.0, seed=2)
    A, b = problem.A.to_dense(), problem.b
    v = torch.linspace(1.0, 2.0, 20, dtype=b.dtype)
    belief, info = run(P.Lanczos(start=v), problem.A, b, 5, seed=None)
    assert info.products == 5  # one product per iteration, nothing hidden
    S = _krylov_basis(A, v, 5)
    x = S @ torch.linalg.solve(S.mT @ A @ S, S.mT @ b)
    assert float((belief.mean - x).norm() / x.norm()) <= krylov_tol(b.dtype, 10.0)
    assert belief.calibrated  # the actions never saw b
    # unlike the residual start, the mean is not CG's iterate
    cg, _ = run(P.Lanczos(), problem.A, b, 5)
    assert float((cg.mean - belief.mean).norm() / x.norm()) > 1e-3


def test_random_start_restarts_in_an_invariant_subspace_and_reaches_the_solution() -> None:
    spectrum = torch.tensor([3.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    problem = pn.problems.spd_from_spectrum(spectrum, generator=torch.Generator().manual_seed(0))
    belief, info = run(P.Lanczos(start="random"), problem.A, problem.b, 8, seed=3)
    assert info.iterations == 8 and info.stop_reason is pn.StopReason.MAX_ITERATIONS
    err = (belief.mean - problem.x_true).norm() / problem.x_true.norm()
    assert float(err) <= krylov_tol(torch.float64, 3.0)
    # a fixed start cannot leave its invariant subspace: it stops like the residual start
    v = torch.ones(8, dtype=torch.float64)
    _, info = run(P.Lanczos(start=v), problem.A, problem.b, 8, seed=None)
    assert info.stop_reason is pn.StopReason.BREAKDOWN and info.iterations == 3


def test_non_adaptive_start_restarts_from_the_newest_image_not_the_residual() -> None:
    problem = make_problem(20, cond=10.0)
    policy = P.Switch([P.UnitVector(), P.Lanczos(start="random")], at=[2])
    assert not policy.adaptive
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(4))
    states = list(solver.iterate(problem.A, problem.b, generator=torch.Generator().manual_seed(0)))
    # the start vector (drawn at the start of the solve) is used for the first own action
    first = states[3].action[:, 0]
    start = states[2].policy_memory[1].start
    assert torch.allclose(first, start / start.norm(), atol=exact_tol(start.dtype, 20))
    assert states[-1].belief.calibrated
    # inside Mixed: after another policy acted, the restart vector is the newest image
    policy = P.Mixed([P.UnitVector(), P.Lanczos(start="random")])
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(12))
    states = list(solver.iterate(problem.A, problem.b, generator=torch.Generator().manual_seed(1)))
    restarts = 0
    for before, after in itertools.pairwise(states):
        memory = before.policy_memory[1]
        acted = after.policy_memory[1].acted_at == before.iteration
        if acted and memory.basis.shape[1] and memory.acted_at < before.iteration - 1:
            Q, z = memory.basis, before.observation[:, 0]
            v = z - Q @ (Q.mT @ z)
            v = v - Q @ (Q.mT @ v)
            assert torch.allclose(after.action[:, 0], v / v.norm(), atol=exact_tol(v.dtype, 20))
            restarts += 1
    assert restarts >= 1
    assert states[-1].belief.calibrated


def test_start_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="start"):
        P.Lanczos(start="b")
    with pytest.raises(ValueError, match="start"):
        P.Lanczos(start=torch.ones(3, 2))
    with pytest.raises(ValueError, match="start"):
        P.Lanczos(start=torch.zeros(3))
    with pytest.raises(ValueError, match="start"):
        P.Lanczos(start=torch.tensor([1.0, float("nan")]))
    problem = make_problem(5)
    with pytest.raises(ValueError, match="generator="):
        run(P.Lanczos(start="random"), problem.A, problem.b, 2, seed=None)
    with pytest.raises(ValueError, match="start"):
        run(P.Lanczos(start=torch.ones(4, dtype=torch.float64)), problem.A, problem.b, 2)
    with pytest.raises(TypeError, match="start"):
        run(P.Lanczos(start=torch.ones(5, dtype=torch.float32)), problem.A, problem.b, 2)


def test_adaptive_and_repr() -> None:
    assert P.Lanczos().adaptive and P.Lanczos(start="residual").adaptive
    assert not P.Lanczos(start="random").adaptive
    assert not P.Lanczos(start=torch.ones(3)).adaptive
    assert repr(P.Lanczos(start="random")) == "Lanczos(start='random')"
    assert repr(P.Lanczos(start=torch.ones(3))) == "Lanczos(start=<tensor (3,)>)"
