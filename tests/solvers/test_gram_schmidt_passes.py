"""The second Gram–Schmidt pass runs only where the first may have left more than rounding."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.solvers.conditioning import Conditioner
from pnsolve.testing import conjugacy_tol

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def passes(monkeypatch):
    """Counts the Gram–Schmidt passes of every update."""
    calls = {"passes": 0}
    original = Conditioner._conjugate

    def counted(self, *args, **kwargs):
        calls["passes"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Conditioner, "_conjugate", counted)
    return calls


def _kernel_problem(n: int = 300):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 3, generator=g, dtype=F64)
    K = pn.kernels.RBF(lengthscale=0.2)(X, X).detach() + 1e-3 * torch.eye(n, dtype=F64)
    return K, torch.randn(n, generator=g, dtype=F64)


def test_cg_actions_take_one_pass_and_stay_conjugate(passes):
    K, b = _kernel_problem()
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(150))
    belief, info = solver.solve(K, b)
    # iteration 0 has nothing to orthogonalise against; CG's residuals keep more than
    # half their A-norm against the observed directions, so one pass each
    assert passes["passes"] == info.iterations - 1
    V = belief.V
    cond = float(torch.linalg.cond(K))
    err = float((V.mT @ K @ V - torch.eye(V.shape[1], dtype=F64)).abs().max())
    assert err <= conjugacy_tol(F64, cond, K.shape[0])


def test_nearly_dependent_actions_take_the_second_pass(passes):
    # each action is the previous one plus 1e-3 × the residual: the first pass removes
    # almost all of it, so the second must run
    K, b = _kernel_problem(100)

    def near_previous(state):
        if state.action is None:
            return state.residual
        prev, r = state.action[:, 0], state.residual
        return prev / prev.norm() + 1e-3 * r / r.norm()

    solver = pn.ProbabilisticLinearSolver(
        pn.policies.Custom(near_previous), pn.stopping.MaxIterations(20)
    )
    belief, info = solver.solve(K, b)
    assert passes["passes"] >= 2 * (info.iterations - 1) - 1
    V = belief.V
    err = float((V.mT @ K @ V - torch.eye(V.shape[1], dtype=F64)).abs().max())
    assert err <= conjugacy_tol(F64, float(torch.linalg.cond(K)), 100)
