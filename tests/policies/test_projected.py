"""Projected policy: actions in range P; singular PSD systems with a known null space."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import iterative_tol

F64 = torch.float64


def _singular_system(n=40, seed=0):
    """A = P B P with B SPD and P = I − 11ᵀ/n (null space: the all-ones vector)."""
    g = torch.Generator().manual_seed(seed)
    G = torch.randn(n, n, generator=g, dtype=F64)
    B = G @ G.T / n + torch.eye(n, dtype=F64)
    P = torch.eye(n, dtype=F64) - torch.full((n, n), 1.0 / n, dtype=F64)
    b = P @ torch.randn(n, generator=g, dtype=F64)
    return P @ B @ P, P, b


def test_actions_lie_in_the_range_of_the_projector():
    A, P, b = _singular_system()
    policy = pn.policies.Projected(pn.policies.CG(), P)
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(5))
    ones = torch.ones(A.shape[0], dtype=F64)
    for state in solver.iterate(A, b):
        if state.action is not None:
            assert float((ones @ state.action).abs()) <= iterative_tol(F64) * float(
                state.action.norm()
            )


def test_cg_past_convergence_keeps_the_belief_in_range_p():
    # 3n iterations: long after the residual reached rounding level. The mean is the
    # minimum-norm solution and the belief's root never grows along the null space.
    A, P, b = _singular_system()
    n = A.shape[0]
    stop = pn.stopping.MaxIterations(3 * n)
    belief, _ = pn.ProbabilisticLinearSolver(
        pn.policies.Projected(pn.policies.CG(), P), stop
    ).solve(A, b)
    x_ref = torch.linalg.pinv(A) @ b
    torch.testing.assert_close(belief.mean, x_ref, rtol=0, atol=iterative_tol(F64) * 10)
    ones = torch.ones(n, dtype=F64) / n**0.5
    assert float((ones @ belief.V).norm()) <= iterative_tol(F64) * float(belief.V.norm())
    # V Vᵀ approximates A⁺ (never exceeds it): trace bounded
    assert float(belief.V.square().sum()) <= float(torch.linalg.pinv(A).trace()) * (1 + 1e-6)


def test_memory_is_passed_through():
    A, P, b = _singular_system(n=20)
    inner = pn.policies.UnitVector(order="sequential")
    policy = pn.policies.Projected(inner, P)
    g = torch.Generator().manual_seed(0)
    Aop = pn.linops.as_linop(A)
    assert isinstance(policy.initial_memory(Aop, b, g), pn.policies.UnitVectorMemory)
    # the wrapped policy advances through its memory: n projected unit vectors span range P
    belief, _ = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(20)).solve(A, b)
    x_ref = torch.linalg.pinv(A) @ b
    torch.testing.assert_close(belief.mean, x_ref, rtol=0, atol=iterative_tol(F64) * 10)


def test_bad_arguments():
    P = torch.eye(4, dtype=F64)
    with pytest.raises(TypeError, match="policy"):
        pn.policies.Projected("cg", P)
    with pytest.raises(ValueError, match="projector"):
        pn.policies.Projected(pn.policies.CG(), torch.ones(4, 3, dtype=F64))
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.Projected(pn.policies.CG(), P), pn.stopping.MaxIterations(2)
    )
    with pytest.raises(ValueError, match="projector"):
        solver.solve(torch.eye(5, dtype=F64), torch.ones(5, dtype=F64))
