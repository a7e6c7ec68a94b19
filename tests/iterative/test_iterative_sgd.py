"""StochasticGradientDescent: reproducibility, true final residual, divergence, budgets."""

from __future__ import annotations

import pytest
import torch
from iterative_support import build_problem

from pnsolve.iterative import StochasticGradientDescent
from pnsolve.testing import exact_tol, iterative_tol

F64 = torch.float64
LOOSE = 1e-2
BATCH = 40
BUDGET = 5.0


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_same_generator_same_result():
    p = build_problem()
    solver = StochasticGradientDescent(tol=LOOSE, batch_size=BATCH)
    a = solver.solve(p.system, p.B, generator=_gen(3))
    b = solver.solve(p.system, p.B, generator=_gen(3))
    c = solver.solve(p.system, p.B, generator=_gen(4))
    assert torch.equal(a.solution, b.solution) and a.history == b.history
    assert not torch.equal(a.solution, c.solution)


def test_reported_residuals_are_true_ones_and_cost_one_epoch(counter):
    p = build_problem(noise=0.05)
    count = counter(p.system)
    solver = StochasticGradientDescent(tol=iterative_tol(F64), batch_size=BATCH)
    r = solver.solve(p.system, p.B, max_epochs=BUDGET, generator=_gen())
    relres = p.relres(r.solution)
    assert not r.converged and r.epochs <= BUDGET
    assert r.residual_norm_mean == pytest.approx(float(relres[0]), rel=exact_tol(F64, p.n))
    assert r.residual_norm_probes == pytest.approx(float(relres[1:].mean()), rel=exact_tol(F64))
    # entries: the batch products plus exactly one true-residual product
    assert count.entries == r.iterations * BATCH * p.n + p.n * p.n


def test_estimate_claims_are_checked(counter):
    p = build_problem()
    count = counter(p.system)
    r = StochasticGradientDescent(tol=LOOSE, batch_size=BATCH).solve(
        p.system, p.B, generator=_gen()
    )
    checks, rest = divmod(count.entries - r.iterations * BATCH * p.n, p.n * p.n)
    assert r.converged and rest == 0 and checks >= 1
    assert r.epochs == count.entries / (p.n * p.n)


def test_too_large_learning_rate_is_reported():
    p = build_problem()
    solver = StochasticGradientDescent(batch_size=BATCH, learning_rate=1e3)
    with pytest.raises(ValueError, match="learning_rate"):
        solver.solve(p.system, p.B, generator=_gen())


def test_plain_sgd_and_full_batches_converge():
    p = build_problem()
    for solver in (
        StochasticGradientDescent(tol=LOOSE, batch_size=BATCH, momentum=0.0),
        StochasticGradientDescent(tol=LOOSE, batch_size=10 * p.n),
    ):
        r = solver.solve(p.system, p.B, generator=_gen())
        assert r.converged and float(p.relres(r.solution)[0]) <= LOOSE


def test_generator_is_required():
    p = build_problem()
    with pytest.raises(TypeError, match="generator"):
        StochasticGradientDescent().solve(p.system, p.B)
    with pytest.raises(TypeError, match="generator"):
        StochasticGradientDescent().solve(p.system, p.B, generator=1)


def test_budget_must_leave_room_for_the_true_residual():
    p = build_problem()
    solver = StochasticGradientDescent()
    with pytest.raises(ValueError, match="max_epochs"):
        solver.solve(p.system, p.B, max_epochs=0.5, generator=_gen())
    with pytest.raises(ValueError, match="max_epochs"):
        solver.solve(p.system, p.B, p.B, max_epochs=1.5, generator=_gen())


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 2.0}, TypeError, "batch_size"),
        ({"learning_rate": 0.0}, ValueError, "learning_rate"),
        ({"learning_rate": float("inf")}, ValueError, "learning_rate"),
        ({"momentum": 1.0}, ValueError, "momentum"),
        ({"momentum": -0.1}, ValueError, "momentum"),
        ({"momentum": "0.9"}, TypeError, "momentum"),
    ],
)
def test_bad_configuration_names_the_argument(kwargs, error, name):
    with pytest.raises(error, match=name):
        StochasticGradientDescent(**kwargs)
