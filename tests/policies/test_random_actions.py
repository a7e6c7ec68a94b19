"""Random actions: distributions, reproducibility through the generator, errors."""

from __future__ import annotations

import math

import pytest
import torch
from policy_helpers import actions, make_problem, run

import pnsolve as pn

P = pn.policies


@pytest.mark.parametrize("distribution", ["gaussian", "rademacher", "sparse_sign"])
def test_same_seed_same_run_other_seed_other_run(distribution: str) -> None:
    problem = make_problem(20)
    policy = P.Random(distribution, block_size=2)
    a = actions(policy, problem.A, problem.b, 4, seed=11)
    b = actions(policy, problem.A, problem.b, 4, seed=11)
    c = actions(policy, problem.A, problem.b, 4, seed=12)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])
    m1, _ = run(policy, problem.A, problem.b, 4, seed=11)
    m2, _ = run(policy, problem.A, problem.b, 4, seed=11)
    assert torch.equal(m1.mean, m2.mean)


def test_rademacher_entries() -> None:
    problem = make_problem(30)
    (S,) = actions(P.Random("rademacher", block_size=4), problem.A, problem.b, 1)
    assert S.shape == (30, 4) and bool((S.abs() == 1).all())


@pytest.mark.parametrize(("kwargs", "nnz"), [({}, 8), ({"nnz": 5}, 5), ({"density": 0.25}, 10)])
def test_sparse_sign_columns(kwargs: dict, nnz: int) -> None:
    problem = make_problem(40)
    (S,) = actions(P.Random("sparse_sign", block_size=6, **kwargs), problem.A, problem.b, 1)
    assert S.shape == (40, 6)
    assert ((S != 0).sum(0) == nnz).all()
    assert torch.allclose(
        S[S != 0].abs(), torch.full((6 * nnz,), 1 / math.sqrt(nnz), dtype=S.dtype)
    )
    assert P.Random("sparse_sign", nnz=100).nnz_for(40) == 40  # capped at n


def test_sparse_sign_dependent_columns_give_breakdown_without_nan() -> None:
    """Few non-zeros can leave rows untouched: dependent actions are dropped, then BREAKDOWN."""
    problem = make_problem(12, seed=12)
    belief, info = run(
        P.Random("sparse_sign", block_size=3, nnz=3), problem.A, problem.b, 4, seed=1
    )
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    assert belief.rank < 12 and bool(torch.isfinite(belief.mean).all())
    assert bool(torch.isfinite(belief.inverse_approx.to_dense()).all())


def test_follows_dtype() -> None:
    problem = make_problem(8, dtype=torch.float32)
    for dist in ("gaussian", "rademacher", "sparse_sign"):
        (S,) = actions(P.Random(dist), problem.A, problem.b, 1)
        assert S.dtype == torch.float32


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="distribution"):
        P.Random("uniform")
    with pytest.raises(ValueError, match="block_size"):
        P.Random(block_size=0)
    with pytest.raises(ValueError, match="nnz"):
        P.Random("gaussian", nnz=3)
    with pytest.raises(ValueError, match="nnz"):
        P.Random("sparse_sign", nnz=0)
    with pytest.raises(ValueError, match="density"):
        P.Random("sparse_sign", density=1.5)
    with pytest.raises(ValueError, match="at most one"):
        P.Random("sparse_sign", nnz=2, density=0.5)
    problem = make_problem(5)
    with pytest.raises(ValueError, match="generator="):
        run(P.Random(), problem.A, problem.b, 2, seed=None)
    solver = pn.ProbabilisticLinearSolver(P.Random(), pn.stopping.MaxIterations(2))
    with pytest.raises(TypeError, match="generator"):
        solver.solve(problem.A, problem.b, generator=42)


def test_repr() -> None:
    assert repr(P.Random("sparse_sign", 2, density=0.1)) == (
        "Random(distribution='sparse_sign', block_size=2, density=0.1)"
    )
    assert repr(P.Random()) == "Random(distribution='gaussian', block_size=1)"
