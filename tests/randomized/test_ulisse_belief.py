"""ULISSE's truncation state as a belief."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import exact_tol, krylov_tol


def _system(n: int = 60, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return pn.problems.exponential_decay(n, cond=1e2, generator=g)


def test_belief_is_the_cg_state_at_truncation():
    p = _system()
    g = torch.Generator().manual_seed(3)
    alpha = 1e-2 * float(torch.linalg.vector_norm(p.b))
    belief, _, info = pn.randomized.ulisse_belief(p.A, p.b, alpha=alpha, beta=0.5, generator=g)
    J = info.iterations
    assert J == belief.rank and J >= info.threshold_iterations
    x_cg, _ = pn.cg(p.A, p.b, rtol=0.0, maxiter=J)
    scale = float(torch.linalg.vector_norm(x_cg))
    assert (
        float(torch.linalg.vector_norm(belief.mean - x_cg))
        <= krylov_tol(torch.float64, 1e2) * scale
    )
    # A-orthonormal root: Vᵀ A V = I, and W = A V
    V = belief.V
    G = V.mT @ (p.A @ V)
    assert float((G - torch.eye(J, dtype=G.dtype)).abs().max()) <= krylov_tol(torch.float64, 1e2)
    assert float((belief.W - p.A @ V).abs().max()) <= exact_tol(torch.float64, 60)
    # the same belief as the PLS with the CG policy after J iterations
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(J))
    pls, _ = solver.solve(p.A, p.b)
    C1, C2 = belief.inverse_approx.to_dense(), pls.inverse_approx.to_dense()
    assert float((C1 - C2).abs().max()) <= krylov_tol(torch.float64, 1e2) * float(C2.abs().max())


def test_estimate_matches_ulisse_with_the_same_seed():
    p = _system(seed=1)
    alpha = 1e-2 * float(torch.linalg.vector_norm(p.b))
    _, est, info = pn.randomized.ulisse_belief(
        p.A, p.b, alpha=alpha, beta=0.5, generator=torch.Generator().manual_seed(7)
    )
    x, info2 = pn.randomized.ulisse(
        p.A, p.b, alpha=alpha, beta=0.5, generator=torch.Generator().manual_seed(7)
    )
    assert torch.equal(est, x) and info.iterations == info2.iterations
    assert info.stop_reason in (pn.StopReason.TRUNCATED, pn.StopReason.CONVERGED)


def test_belief_needs_a_single_rhs_and_a_generator():
    p = _system()
    with pytest.raises(ValueError, match="b must have shape"):
        pn.randomized.ulisse_belief(
            p.A, torch.stack([p.b, p.b], -1), alpha=0.1, beta=1.0,
            generator=torch.Generator(),
        )  # fmt: skip
    with pytest.raises(TypeError, match="generator"):
        pn.randomized.ulisse_belief(p.A, p.b, alpha=0.1, beta=1.0, generator=0)
