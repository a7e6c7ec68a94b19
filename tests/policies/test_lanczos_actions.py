"""Lanczos actions: orthonormal Krylov basis; under the inverse prior the mean is CG's."""

from __future__ import annotations

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
