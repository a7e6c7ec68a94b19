"""``pn.problinsolve``: the SciPy-like front door to the probabilistic linear solver."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import pnsolve as pn
from pnsolve.linops import Diagonal
from pnsolve.problems import make_problem
from pnsolve.stopping import MaxIterations, ResidualNorm
from pnsolve.testing import CountingOperator, iterative_tol, krylov_tol

F64 = torch.float64


def _problem(n=30, cond=1e3, seed=0):
    return make_problem("exponential", n, generator=torch.Generator().manual_seed(seed), cond=cond)


def _rel(a, b):
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def test_defaults_converge_to_rtol():
    p = _problem()
    belief, info = pn.problinsolve(p.A, p.b)
    assert isinstance(belief, pn.beliefs.GaussianSolutionBelief)
    assert isinstance(info, pn.SolveInfo)
    assert info.stop_reason is pn.StopReason.CONVERGED and info.converged
    rtol = inspect.signature(pn.problinsolve).parameters["rtol"].default
    assert float(info.residual_norms[-1]) <= rtol * float(p.b.norm())
    assert info.products == info.iterations


def test_equals_the_composed_solver():
    p = _problem()
    rtol = iterative_tol(F64)
    belief, info = pn.problinsolve(p.A, p.b, rtol=rtol, maxiter=12, prior=2.0)
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.CG(), MaxIterations(12) | ResidualNorm(rtol=rtol), prior=2.0
    )
    ref, ref_info = solver.solve(p.A, p.b)
    assert torch.equal(belief.mean, ref.mean)
    assert info.iterations == ref_info.iterations == 12
    assert info.stop_reason is pn.StopReason.MAX_ITERATIONS


def test_default_maxiter_is_n_and_exact():
    p = _problem(n=20, cond=1e2)
    belief, info = pn.problinsolve(p.A, p.b, rtol=0.0)
    assert info.iterations <= 20
    assert _rel(belief.mean, p.x_true) <= krylov_tol(F64, 1e2)


def test_preconditioner_is_used_by_the_cg_policy():
    p = _problem(n=40, cond=1e4)
    M = Diagonal(1.0 / p.A.diagonal())
    A = CountingOperator(p.A)
    belief, _info = pn.problinsolve(A, p.b, M=M, maxiter=5, rtol=0.0)
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.CG(preconditioner=M), MaxIterations(5), preconditioner=None
    )
    ref, _ = solver.solve(p.A, p.b)
    assert _rel(belief.mean, ref.mean) <= krylov_tol(F64, 1e4)
    assert A.matmat_calls == 5


@pytest.mark.parametrize("name", ["unitvector", "random", "lanczos", "CG"])
def test_policy_names(name):
    p = _problem(n=15, cond=1e2)
    belief, _info = pn.problinsolve(
        p.A, p.b, policy=name, rtol=0.0, generator=torch.Generator().manual_seed(0)
    )
    assert _rel(belief.mean, p.x_true) <= krylov_tol(F64, 1e2 * 15)


def test_accepts_numpy():
    p = _problem(n=10, cond=10.0)
    belief, _ = pn.problinsolve(p.A.to_dense().numpy(), p.b.numpy(), rtol=0.0)
    assert isinstance(belief.mean, torch.Tensor)
    assert np.allclose(belief.mean.numpy(), p.x_true.numpy(), rtol=krylov_tol(F64, 10.0))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"policy": "gmres"}, ValueError, "policy must be a Policy or one of"),
        ({"policy": 3}, ValueError, "policy must be"),
        ({"rtol": -1.0}, ValueError, "rtol"),
        ({"atol": float("nan")}, ValueError, "atol"),
        ({"maxiter": -1}, ValueError, "maxiter"),
        ({"maxiter": 2.5}, TypeError, "maxiter"),
        ({"prior": "flat"}, ValueError, "prior"),
        ({"generator": 1}, TypeError, "generator"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    p = _problem(n=5, cond=10.0)
    with pytest.raises(exc, match=match):
        pn.problinsolve(p.A, p.b, **kwargs)


def test_zero_rhs():
    p = _problem(n=5, cond=10.0)
    belief, info = pn.problinsolve(p.A, torch.zeros(5, dtype=F64))
    assert info.stop_reason is pn.StopReason.ZERO_RHS and info.iterations == 0
    assert torch.equal(belief.mean, torch.zeros(5, dtype=F64))
