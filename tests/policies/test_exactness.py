"""After n independent actions the belief is exact: mean = A⁻¹b and C_n = A⁻¹ (Σ_n = 0)."""

from __future__ import annotations

import math

import pytest
import torch
from policy_helpers import make_problem, run

import pnsolve as pn
from pnsolve.testing import krylov_tol

P = pn.policies
COND = 100.0


def _cases():
    return {
        "unit-sequential": P.UnitVector("sequential"),
        "unit-random": P.UnitVector("random"),
        "unit-pivot": P.UnitVector("pivot"),
        "gaussian": P.Random("gaussian"),
        "rademacher": P.Random("rademacher"),
        "sparse-sign": P.Random("sparse_sign", nnz=6),
        "sparse-sign-density": P.Random("sparse_sign", density=0.5),
        "lanczos": P.Lanczos(),
        "cg": P.CG(),
        "unit-pivot-block3": P.UnitVector("pivot", block_size=3),
        "unit-random-block3": P.UnitVector("random", block_size=3),
        "gaussian-block3": P.Random("gaussian", block_size=3),
        "sparse-sign-block3": P.Random("sparse_sign", block_size=3, nnz=6),
    }


def _assert_exact(belief, problem, cond: float = COND) -> None:
    dtype = problem.b.dtype
    tol = krylov_tol(dtype, cond)
    x = problem.x_true
    assert float((belief.mean - x).norm() / x.norm()) <= tol
    Ainv = torch.linalg.inv(problem.A.to_dense())
    C = belief.inverse_approx.to_dense()
    assert float((C - Ainv).norm() / Ainv.norm()) <= tol
    assert belief.rank == problem.n


@pytest.mark.parametrize("n", [12, 13])  # divisible by the block size 3, and not
@pytest.mark.parametrize("name", list(_cases()))
def test_exact_after_n_independent_actions(name: str, n: int) -> None:
    policy = _cases()[name]
    problem = make_problem(n, cond=COND, seed=n)
    block = getattr(policy, "block_size", 1)
    belief, info = run(policy, problem.A, problem.b, iterations=math.ceil(n / block), seed=1)
    assert info.stop_reason is pn.StopReason.MAX_ITERATIONS
    assert info.iterations == math.ceil(n / block)
    _assert_exact(belief, problem)


def test_covariance_vanishes_after_n_actions() -> None:
    problem = make_problem(12, cond=COND)
    belief, _ = run(P.Random("rademacher", block_size=3), problem.A, problem.b, 4, seed=2)
    Ainv = torch.linalg.inv(problem.A.to_dense())
    cov = belief.cov.to_dense()
    assert float(cov.norm() / Ainv.norm()) <= krylov_tol(torch.float64, COND)


def test_exact_in_float32() -> None:
    problem = make_problem(10, cond=10.0, dtype=torch.float32)
    belief, _ = run(P.Random("gaussian", block_size=5), problem.A, problem.b, 2, seed=0)
    assert belief.mean.dtype == torch.float32
    _assert_exact(belief, problem, cond=10.0)
