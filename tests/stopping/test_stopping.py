"""Stopping criteria: semantics, recorded reasons and composition with ``|``, ``&``, ``~``."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.policies import Policy
from pnsolve.problems import make_problem
from pnsolve.stopping import (
    AllOf,
    AnyOf,
    MatvecBudget,
    MaxIterations,
    Not,
    PosteriorContraction,
    ResidualNorm,
)
from pnsolve.testing import exact_tol, krylov_tol

F64 = torch.float64
R = pn.StopReason


def _problem(n=20, cond=1e2, seed=0):
    return make_problem("exponential", n, generator=torch.Generator().manual_seed(seed), cond=cond)


def _run(stopping, p=None, policy=None, prior="inverse", **kw):
    p = p or _problem()
    solver = pn.ProbabilisticLinearSolver(policy or pn.policies.CG(), stopping, prior=prior)
    return list(solver.iterate(p.A, p.b, **kw))


def test_max_iterations():
    states = _run(MaxIterations(3))
    assert states[-1].iteration == 3 and states[-1].stop_reason is R.MAX_ITERATIONS
    assert _run(MaxIterations(0))[-1].iteration == 0


def test_or_stops_at_the_first_and_records_its_reason():
    states = _run(MaxIterations(5) | MatvecBudget(3))
    assert states[-1].iteration == 3 and states[-1].stop_reason is R.BUDGET
    # both fire at the same iteration: the first operand's reason is recorded
    states = _run(MatvecBudget(4) | MaxIterations(4))
    assert states[-1].iteration == 4 and states[-1].stop_reason is R.BUDGET
    states = _run(MaxIterations(4) | MatvecBudget(4))
    assert states[-1].stop_reason is R.MAX_ITERATIONS


def test_and_waits_for_all_and_records_the_first_reason():
    states = _run(MaxIterations(2) & MatvecBudget(5))
    assert states[-1].iteration == 5 and states[-1].stop_reason is R.MAX_ITERATIONS


def test_not_fires_while_the_wrapped_criterion_does_not():
    states = _run(~MaxIterations(2))
    assert states[-1].iteration == 0 and states[-1].stop_reason is R.CRITERION
    # "at least one iteration, and then only while fewer than 2": stops at 1
    states = _run(~MaxIterations(2) & MaxIterations(1))
    assert states[-1].iteration == 1 and states[-1].stop_reason is R.CRITERION
    assert _run(~~MaxIterations(3))[-1].iteration == 3


def test_composition_flattens_and_validates():
    a, b, c = MaxIterations(1), MaxIterations(2), MatvecBudget(3)
    assert isinstance(a | b | c, AnyOf) and len((a | b | c).criteria) == 3
    assert isinstance(a & b & c, AllOf) and len((a & b & c).criteria) == 3
    assert len(((a | b) & c).criteria) == 2
    assert isinstance(~a, Not)
    assert repr(a | c) == "(MaxIterations(1) | MatvecBudget(3))"
    with pytest.raises(TypeError, match="StoppingCriterion"):
        AnyOf(a, 3)
    with pytest.raises(TypeError, match="StoppingCriterion"):
        AllOf(a, "never")
    with pytest.raises(TypeError, match="StoppingCriterion"):
        Not(None)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: MaxIterations(-1), "maxiter"),
        (lambda: MaxIterations(2.0), "maxiter"),
        (lambda: MaxIterations(True), "maxiter"),
        (lambda: MatvecBudget(-3), "budget"),
        (lambda: ResidualNorm(rtol=-1.0), "rtol"),
        (lambda: ResidualNorm(atol=float("nan")), "atol"),
        (lambda: PosteriorContraction(torch.ones(3, 3, 3)), "direction"),
        (lambda: PosteriorContraction(torch.ones(3), rtol=-1.0), "rtol"),
    ],
)
def test_bad_configuration(make, match):
    with pytest.raises(ValueError, match=match):
        make()
    with pytest.raises(TypeError, match=r"direction must be a torch\.Tensor"):
        PosteriorContraction([1.0, 2.0])


def test_matvec_budget_counts_block_columns():
    n, m = 20, 3
    S = torch.randn(n, 4 * m, generator=torch.Generator().manual_seed(0), dtype=F64)

    class Blocks(Policy):
        def __call__(self, state, generator):
            i = state.iteration
            return S[:, m * i : m * (i + 1)], None

    states = _run(MatvecBudget(7), policy=Blocks())
    # 3 + 3 = 6 < 7 columns after two iterations, 9 ≥ 7 after three
    assert [s.matvecs for s in states] == [0, 3, 6, 9]
    assert states[-1].stop_reason is R.BUDGET


def test_matvec_budget_counts_the_initial_residual_and_general_prior_products():
    p = _problem()
    states = _run(MatvecBudget(5), p=p, x0=torch.zeros(20, dtype=F64))
    assert [s.matvecs for s in states] == [1, 2, 3, 4, 5]
    states = _run(MatvecBudget(5), p=p, prior=1.0)
    assert [s.matvecs for s in states] == [0, 2, 4, 6]


def test_residual_norm_zero_rhs_at_iteration_zero():
    p = _problem()
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), ResidualNorm() | MaxIterations(5))
    states = list(solver.iterate(p.A, torch.zeros(20, dtype=F64)))
    assert len(states) == 1 and states[0].stop_reason is R.ZERO_RHS


def test_residual_norm_uses_max_of_rtol_and_atol():
    p = _problem(n=40, cond=1e4)
    bnorm = float(p.b.norm())
    for rtol, atol in [(1e-3, 0.0), (0.0, 1e-3 * bnorm), (1e-6, 1e-3 * bnorm)]:
        states = _run(ResidualNorm(rtol=rtol, atol=atol) | MaxIterations(200), p=p)
        tol = max(rtol * bnorm, atol)
        assert states[-1].stop_reason is R.CONVERGED
        assert float(states[-1].residual_norm) <= tol
        assert all(float(s.residual_norm) > tol for s in states[:-1])


def test_posterior_contraction_matches_belief_var():
    n = 25
    p = _problem(n=n, cond=1e3, seed=2)
    u = torch.randn(n, generator=torch.Generator().manual_seed(3), dtype=F64)
    rtol = 1e-2
    states = _run(PosteriorContraction(u, rtol=rtol) | MaxIterations(n), p=p)
    last = states[-1]
    assert last.stop_reason is R.CONTRACTION and 0 < last.iteration < n
    prior_var = float(u @ torch.linalg.solve(p.A.to_dense(), u))
    assert float(states[0].stopping_memory[0]) == pytest.approx(prior_var, rel=krylov_tol(F64, 1e3))
    tol = krylov_tol(F64, 1e3)
    assert float(last.belief.var(u)) <= rtol * prior_var * (1 + tol)
    assert float(states[-2].belief.var(u)) > rtol * prior_var * (1 - tol)


def test_posterior_contraction_block_needs_every_column():
    n = 20
    p = _problem(n=n, cond=1e2, seed=4)
    U = torch.randn(n, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    one = _run(PosteriorContraction(U[:, 0], rtol=1e-2) | MaxIterations(n), p=p)
    two = _run(PosteriorContraction(U[:, 1], rtol=1e-2) | MaxIterations(n), p=p)
    both = _run(PosteriorContraction(U, rtol=1e-2) | MaxIterations(n), p=p)
    assert both[-1].iteration == max(one[-1].iteration, two[-1].iteration)
    assert both[-1].stop_reason is R.CONTRACTION


def test_posterior_contraction_general_prior():
    n = 20
    p = _problem(n=n, cond=1e2, seed=6)
    u = torch.zeros(n, dtype=F64)
    u[0] = 1.0
    sigma2 = 3.0
    states = _run(PosteriorContraction(u, rtol=0.5) | MaxIterations(n), p=p, prior=sigma2)
    assert states[-1].stop_reason is R.CONTRACTION
    assert float(states[0].stopping_memory[0]) == pytest.approx(sigma2, rel=exact_tol(F64))
    assert float(states[-1].belief.var(u)) <= 0.5 * sigma2 * (1 + exact_tol(F64, n))


def test_custom_criterion_with_memory():
    class Halved(pn.stopping.StoppingCriterion):
        """Stop once the residual norm has halved (memory: the initial norm)."""

        def initial_memory(self, state):
            return float(state.residual_norm)

        def check(self, state, memory):
            return R.CALLBACK if float(state.residual_norm) <= memory / 2 else None

    states = _run(Halved() | MaxIterations(20))
    assert states[-1].stop_reason is R.CALLBACK
    assert float(states[-1].residual_norm) <= float(states[0].residual_norm) / 2
