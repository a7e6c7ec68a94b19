"""AlternatingProjections: Algorithm 2's steps, cached block factors, b/n epochs per
iteration, budgets in iterations."""

from __future__ import annotations

import math

import pytest
import torch
from iterative_support import build_problem

from pnsolve.iterative import AlternatingProjections
from pnsolve.testing import exact_tol, iterative_tol, krylov_tol

F64 = torch.float64
#: The paper's τ: above √eps, so no confirmation products and the cost formulas are exact.
PAPER_TOL = 1e-2
BLOCK = 50  # n = 120: blocks of 50, 50 and 20


def test_each_block_is_factorised_once_per_solve(counter):
    p = build_problem()
    count = counter(p.system)
    solver = AlternatingProjections(tol=iterative_tol(F64), block_size=BLOCK)
    _, r = solver.solve(p.system, p.B)
    assert r.converged and r.iterations > math.ceil(p.n / BLOCK)
    assert len(count.blocks) == len(set(count.blocks)) <= math.ceil(p.n / BLOCK)
    first = len(count.blocks)
    solver.solve(p.system, p.B)  # a new solve factorises again
    assert len(count.blocks) == 2 * first


def test_cost_is_b_n_per_iteration_plus_the_factorisations(counter):
    p = build_problem()
    count = counter(p.system)
    _, r = AlternatingProjections(tol=PAPER_TOL, block_size=BLOCK).solve(p.system, p.B)
    factors = sum(len(b) ** 2 for b in count.blocks)
    # every iteration visits a block of size BLOCK or the last one (20 rows)
    assert count.entries == r.epochs * p.n * p.n
    assert count.entries == count.by_access["columns"] + factors
    assert r.setup_epochs == pytest.approx(factors / p.n**2, rel=exact_tol(F64))
    visits = count.by_access["columns"]
    assert visits % p.n == 0 and visits // p.n <= r.iterations * BLOCK


def test_a_single_block_is_a_direct_solve():
    p = build_problem()
    U_r, r = AlternatingProjections(tol=iterative_tol(F64), block_size=10 * p.n).solve(
        p.system, p.B
    )
    assert r.iterations == 1 and r.converged
    assert float(p.relres(U_r).max()) <= krylov_tol(F64, p.cond())


def test_the_block_with_the_largest_residual_goes_first(counter):
    p = build_problem()
    count = counter(p.system)
    B = torch.zeros_like(p.B)
    B[2 * BLOCK :] = p.B[2 * BLOCK :]  # residual only in the last (short) block
    AlternatingProjections(tol=PAPER_TOL, block_size=BLOCK, max_iterations=1).solve(p.system, B)
    assert count.blocks == [tuple(range(2 * BLOCK, p.n))]


def _reference_iterations(p, B, x0, steps):
    """Algorithm 2 by hand on the dense ``K̂`` (normalised problem): the blocks chosen,
    the iterates and the residuals after each of ``steps`` iterations."""
    blocks = [torch.arange(s, min(s + BLOCK, p.n)) for s in range(0, p.n, BLOCK)]
    scale = torch.linalg.vector_norm(B, dim=0)
    U = torch.zeros_like(B) if x0 is None else x0 / scale
    R = B / scale - p.K @ U
    out = []
    for _ in range(steps):
        # the block with the largest residual, Σ_j ‖R_j[I]‖ over the columns
        scores = torch.stack([torch.linalg.vector_norm(R[I], dim=0).sum() for I in blocks])
        I = blocks[int(scores.argmax())]
        delta = torch.linalg.solve(p.K[I][:, I], R[I])  # Δ = K̂[I, I]⁻¹ R[I]
        U = U.clone()
        U[I] += delta
        R = R - p.K[:, I] @ delta  # R ← R − K̂[:, I] Δ
        out.append((tuple(I.tolist()), U * scale, torch.linalg.vector_norm(R, dim=0)))
    return out


@pytest.mark.parametrize("warm", [False, True])
def test_iterations_follow_algorithm_2(counter, warm):
    p = build_problem()
    B = p.B.clone()
    B[BLOCK : 2 * BLOCK] *= 4  # the middle block has the largest residual at first
    x0 = 0.1 * p.B if warm else None
    steps = 4
    ref = _reference_iterations(p, B, x0, steps)
    assert ref[0][0] == tuple(range(BLOCK, 2 * BLOCK))  # not simply the first block
    tol = krylov_tol(F64, p.cond())
    for m in range(1, steps + 1):
        count = counter(p.system)
        U_r, r = AlternatingProjections(
            tol=iterative_tol(F64), block_size=BLOCK, max_iterations=m
        ).solve(p.system, B, x0)
        assert r.iterations == m
        # blocks in the order of their first visit, each factorised once
        assert count.blocks == list(dict.fromkeys(blk for blk, _, _ in ref[:m]))
        _, U, norms = ref[m - 1]
        err = torch.linalg.matrix_norm(U_r - U) / torch.linalg.matrix_norm(U)
        assert float(err) <= tol
        assert r.residual_norm_mean == pytest.approx(float(norms[0]), rel=tol)
        assert r.residual_norm_probes == pytest.approx(float(norms[1:].mean()), rel=tol)
        for h, (_, _, hn) in zip(r.history, ref, strict=False):
            assert h[1] == pytest.approx(float(hn[0]), rel=tol)


@pytest.mark.parametrize("max_epochs", [BLOCK / 120, 1.0, 2.5, 3.7])
@pytest.mark.parametrize("warm", [False, True])
def test_budget_caps_iterations_at_T_n_over_b(counter, max_epochs, warm):
    """Algorithm 2: ``t < (n/b)·T``; the factors and the warm-start residual are set-up."""
    p = build_problem(noise=0.02)  # ill-conditioned: not converged within the budget
    count = counter(p.system)
    n2 = p.n * p.n
    x0 = p.B if warm else None
    solver = AlternatingProjections(tol=iterative_tol(F64), block_size=BLOCK)
    _, r = solver.solve(p.system, p.B, x0, max_epochs=max_epochs)
    assert r.iterations == math.floor(max_epochs * p.n / BLOCK) and not r.converged
    setup = (n2 if warm else 0) + sum(len(b) ** 2 for b in count.blocks)
    assert count.entries == count.by_access["columns"] + setup
    assert r.epochs == count.entries / n2
    assert r.setup_epochs == pytest.approx(setup / n2, rel=exact_tol(F64))
    assert count.by_access["columns"] <= max_epochs * n2  # the iterations keep the budget
    assert r.epochs - r.setup_epochs <= max_epochs * (1 + exact_tol(F64))  # float rounding


def test_budget_below_one_block_raises():
    p = build_problem()
    solver = AlternatingProjections(block_size=BLOCK)
    with pytest.raises(ValueError, match="max_epochs"):
        solver.solve(p.system, p.B, max_epochs=0.99 * BLOCK / p.n)


@pytest.mark.parametrize(("size", "error"), [(0, ValueError), (1.5, TypeError)])
def test_bad_block_size_names_the_argument(size, error):
    with pytest.raises(error, match="block_size"):
        AlternatingProjections(block_size=size)
