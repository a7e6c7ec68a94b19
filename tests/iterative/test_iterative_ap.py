"""AlternatingProjections: cached block factors, greedy blocks, b/n epochs per iteration."""

from __future__ import annotations

import math

import pytest
import torch
from iterative_support import build_problem

from pnsolve.iterative import AlternatingProjections
from pnsolve.testing import iterative_tol, krylov_tol

F64 = torch.float64
LOOSE = 1e-2  # above √eps: no confirmation product, so the cost formula is exact
BLOCK = 50  # n = 120: blocks of 50, 50 and 20


def test_each_block_is_factorised_once_per_solve(counter):
    p = build_problem()
    count = counter(p.system)
    solver = AlternatingProjections(tol=iterative_tol(F64), block_size=BLOCK)
    r = solver.solve(p.system, p.B)
    assert r.converged and r.iterations > math.ceil(p.n / BLOCK)
    assert len(count.blocks) == len(set(count.blocks)) <= math.ceil(p.n / BLOCK)
    first = len(count.blocks)
    solver.solve(p.system, p.B)  # a new solve factorises again
    assert len(count.blocks) == 2 * first


def test_cost_is_b_n_per_iteration_plus_the_factorisations(counter):
    p = build_problem()
    count = counter(p.system)
    r = AlternatingProjections(tol=LOOSE, block_size=BLOCK).solve(p.system, p.B)
    sizes = [len(b) for b in count.blocks]
    # every iteration visits a block of size BLOCK or the last one (20 rows)
    assert count.entries == r.epochs * p.n * p.n
    visits = r.epochs * p.n * p.n - sum(s * s for s in sizes)
    assert visits % p.n == 0 and visits // p.n <= r.iterations * BLOCK


def test_a_single_block_is_a_direct_solve():
    p = build_problem()
    r = AlternatingProjections(tol=iterative_tol(F64), block_size=10 * p.n).solve(p.system, p.B)
    assert r.iterations == 1 and r.converged
    assert float(p.relres(r.solution).max()) <= krylov_tol(F64, p.cond())


def test_the_block_with_the_largest_residual_goes_first(counter):
    p = build_problem()
    count = counter(p.system)
    B = torch.zeros_like(p.B)
    B[2 * BLOCK :] = p.B[2 * BLOCK :]  # residual only in the last (short) block
    AlternatingProjections(tol=LOOSE, block_size=BLOCK, max_iterations=1).solve(p.system, B)
    assert count.blocks == [tuple(range(2 * BLOCK, p.n))]


@pytest.mark.parametrize(("size", "error"), [(0, ValueError), (1.5, TypeError)])
def test_bad_block_size_names_the_argument(size, error):
    with pytest.raises(error, match="block_size"):
        AlternatingProjections(block_size=size)
