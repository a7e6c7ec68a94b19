"""ConjugateGradients: one epoch per iteration, preconditioning, frozen columns."""

from __future__ import annotations

import pytest
import torch
from iterative_support import build_problem

from pnsolve.iterative import ConjugateGradients
from pnsolve.testing import iterative_tol

F64 = torch.float64
LOOSE = 1e-2  # above √eps: no confirmation product, so the cost formula is exact
RANK = 20


def test_each_iteration_costs_one_epoch_after_the_preconditioner(counter):
    p = build_problem()
    count = counter(p.system)
    r = ConjugateGradients(tol=LOOSE, preconditioner_rank=RANK).solve(p.system, p.B)
    n = p.n
    setup = (RANK + 1) * n  # the diagonal and one column per pivot
    assert count.entries == r.iterations * n * n + setup
    entries = [round(h[0] * n * n) for h in r.history]
    assert entries == [setup + (i + 1) * n * n for i in range(r.iterations)]


def test_plain_cg_costs_exactly_its_iterations():
    p = build_problem()
    r = ConjugateGradients(tol=LOOSE, preconditioner_rank=0).solve(p.system, p.B)
    assert r.converged and r.epochs == r.iterations


def test_preconditioner_saves_iterations_on_an_ill_conditioned_system():
    p = build_problem(noise=1e-3)
    tol = iterative_tol(F64)
    plain = ConjugateGradients(tol=tol, preconditioner_rank=0).solve(p.system, p.B)
    pc = ConjugateGradients(tol=tol, preconditioner_rank=2 * RANK).solve(p.system, p.B)
    assert pc.converged and plain.converged
    assert pc.iterations < plain.iterations
    assert float(p.relres(pc.solution).max()) <= tol * p.B.shape[1]


def test_converged_columns_are_frozen():
    p = build_problem()
    # the mean column meets tol = 1 at u = 0 and is never touched
    r = ConjugateGradients(tol=1.0, tol_probes=LOOSE).solve(p.system, p.B)
    assert r.iterations > 0
    assert torch.all(r.solution[:, 0] == 0)


def test_rank_is_capped_below_n():
    p = build_problem(n=30)
    r = ConjugateGradients(tol=iterative_tol(F64), preconditioner_rank=100).solve(p.system, p.B)
    assert r.converged


@pytest.mark.parametrize(("rank", "error"), [(-1, ValueError), (2.0, TypeError), (None, TypeError)])
def test_bad_rank_names_the_argument(rank, error):
    with pytest.raises(error, match="preconditioner_rank"):
        ConjugateGradients(preconditioner_rank=rank)


def test_generator_is_optional_but_typed():
    p = build_problem()
    with pytest.raises(TypeError, match="generator"):
        ConjugateGradients().solve(p.system, p.B, generator=0)
