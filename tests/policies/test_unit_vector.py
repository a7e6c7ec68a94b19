"""Unit-vector actions: partial Cholesky / subset-of-data, index bookkeeping, errors."""

from __future__ import annotations

import itertools

import pytest
import torch
from policy_helpers import actions, make_problem, run

import pnsolve as pn
from pnsolve.testing import exact_tol, krylov_tol
from pnsolve.testing.device import suite_device

P = pn.policies


def _indices(blocks: list[torch.Tensor]) -> torch.Tensor:
    """The coordinate of every unit column, in order."""
    return torch.cat([S.argmax(dim=0) for S in blocks])


@pytest.mark.parametrize(
    ("order", "block_size"),
    [
        ("sequential", 1),
        ("random", 1),
        ("pivot", 1),
        ("pivot", 3),
        ("random", 2),
        ("schur", 1),
        ("schur", 2),
    ],
)
def test_partial_cholesky(order: str, block_size: int) -> None:
    """x_I = A_II⁻¹ b_I, zero elsewhere; C_i = zero-padded A_II⁻¹ (x0 = 0)."""
    problem = make_problem(15, cond=100.0, seed=4)
    A, b, policy = problem.A, problem.b, P.UnitVector(order, block_size)
    iterations = 3
    blocks = actions(policy, A, b, iterations, seed=5)
    for S in blocks:  # genuine unit vectors
        assert bool(((S == 0) | (S == 1)).all()) and bool((S.sum(0) == 1).all())
    idx = _indices(blocks)
    assert idx.unique().numel() == idx.numel() == iterations * block_size
    belief, _ = run(policy, A, b, iterations, seed=5)
    AII = A.to_dense()[idx][:, idx]
    cond = float(torch.linalg.cond(AII))
    x = torch.zeros_like(b)
    x[idx] = torch.linalg.solve(AII, b[idx])
    tol = krylov_tol(b.dtype, cond)
    assert float((belief.mean - x).norm() / x.norm()) <= tol
    C = torch.zeros(15, 15, dtype=b.dtype)
    C[idx.unsqueeze(1), idx] = torch.linalg.inv(AII)
    assert float((belief.inverse_approx.to_dense() - C).norm() / C.norm()) <= tol
    # the residual vanishes on the observed coordinates (subset of data fit exactly)
    r = b - A @ belief.mean
    assert float(r[idx].abs().max()) <= tol * float(b.norm())


def test_orders() -> None:
    problem = make_problem(10)
    A, b = problem.A, problem.b
    seq = _indices(actions(P.UnitVector(block_size=3), A, b, 4))
    assert seq.tolist() == list(range(10))
    rnd = _indices(actions(P.UnitVector("random"), A, b, 10, seed=7))
    assert sorted(rnd.tolist()) == list(range(10))
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(7))
    assert rnd.tolist() == perm.tolist()  # the permutation comes from the solve's generator


def test_pivot_picks_largest_unused_residual() -> None:
    problem = make_problem(10, seed=2)
    solver = pn.ProbabilisticLinearSolver(P.UnitVector("pivot"), pn.stopping.MaxIterations(6))
    states = list(solver.iterate(problem.A, problem.b))
    for before, after in itertools.pairwise(states):
        chosen = int(after.action.argmax())
        used = before.policy_memory.chosen
        score = before.residual.abs().clone()
        score[used] = -1.0
        assert chosen == int(score.argmax())
        assert chosen not in used.tolist()
    assert states[-1].policy_memory.chosen.numel() == 6


def test_exhausted_indices_give_breakdown_without_nan() -> None:
    problem = make_problem(6)
    belief, info = run(P.UnitVector(block_size=4), problem.A, problem.b, 10)
    assert info.iterations == 2 and info.stop_reason is pn.StopReason.BREAKDOWN
    assert bool(torch.isfinite(belief.mean).all())
    err = (belief.mean - problem.x_true).norm() / problem.x_true.norm()
    assert float(err) <= krylov_tol(torch.float64, 100.0)


def test_follows_dtype() -> None:
    problem = make_problem(8, dtype=torch.float32)
    (S,) = actions(P.UnitVector("pivot", 2), problem.A, problem.b, 1)
    assert S.dtype == torch.float32 and S.device == problem.b.device
    belief, _ = run(P.UnitVector(), problem.A, problem.b, 1)
    expected = problem.b[0] / problem.A.to_dense()[0, 0]
    assert abs(float(belief.mean[0] - expected)) <= exact_tol(torch.float32) * abs(float(expected))


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="order"):
        P.UnitVector("largest")
    with pytest.raises(ValueError, match="block_size"):
        P.UnitVector(block_size=0)
    with pytest.raises(ValueError, match="block_size"):
        P.UnitVector(block_size=True)
    problem = make_problem(5)
    with pytest.raises(ValueError, match="generator="):
        run(P.UnitVector("random"), problem.A, problem.b, 2, seed=None)
    with pytest.raises(TypeError, match="generator"):
        P.UnitVector("random").initial_memory(problem.A, problem.b, 0)


def test_repr() -> None:
    assert repr(P.UnitVector("pivot", 2)) == "UnitVector(order='pivot', block_size=2)"


def test_schur_pivots_are_greedy_pivoted_cholesky() -> None:
    """One pivot per iteration: the pivots of the pivoted-Cholesky preconditioner of A."""
    problem = make_problem(12, cond=100.0, seed=6)
    A = problem.A
    chosen = _indices(actions(P.UnitVector("schur"), A, problem.b, 8))
    reference = pn.preconditioners.PivotedCholesky(A, rank=8, tol=0.0).pivots
    assert chosen.tolist() == reference.tolist()


def test_schur_diagonal_is_read_from_the_belief_without_products() -> None:
    problem = make_problem(12, cond=100.0, seed=6)
    A = problem.A.to_dense()
    solver = pn.ProbabilisticLinearSolver(P.UnitVector("schur"), pn.stopping.MaxIterations(5))
    states = list(solver.iterate(problem.A, problem.b))
    assert [s.products for s in states] == list(range(6))
    last = states[-1]
    C = last.belief.inverse_approx.to_dense()
    schur = torch.diagonal(A - A @ C @ A)
    memory = last.policy_memory
    # the memory's diagonal accounts for the directions seen when the last action was chosen
    assert memory.seen == 4
    policy = P.UnitVector("schur")
    _, after = policy(last, None)
    assert after.seen == 5
    tol = exact_tol(A.dtype, 12) * float(A.diagonal().max()) * 10
    assert float((after.schur - schur).abs().max()) <= tol
    assert not policy.adaptive


def test_schur_needs_the_inverse_prior_and_a_diagonal() -> None:
    problem = make_problem(6)
    solver = pn.ProbabilisticLinearSolver(
        P.UnitVector("schur"), pn.stopping.MaxIterations(2), prior=1.0
    )
    with pytest.raises(ValueError, match="inverse prior"):
        solver.solve(problem.A, problem.b)
    A = pn.linops.Closure(
        lambda X: problem.A @ X,
        (6, 6),
        dtype=problem.b.dtype,
        is_symmetric=True,
        device=suite_device(),
    )
    with pytest.raises(
        pn.MissingStructureError, match="UnitVector\\('schur'\\) needs the diagonal"
    ):
        run(P.UnitVector("schur"), A, problem.b, 2)


def test_schur_exhausts_every_index_then_breaks_down() -> None:
    problem = make_problem(6)
    belief, info = run(P.UnitVector("schur", block_size=4), problem.A, problem.b, 10)
    assert info.iterations == 2 and info.stop_reason is pn.StopReason.BREAKDOWN
    x = torch.linalg.solve(problem.A.to_dense(), problem.b)
    assert float((belief.mean - x).norm() / x.norm()) <= krylov_tol(x.dtype, 100.0)
