"""EpochBudget: the probabilistic solver on a KernelSystem stops once the budget is spent."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.iterative import KernelSystem
from pnsolve.stopping import EpochBudget, MatvecBudget, MaxIterations, ResidualNorm
from pnsolve.testing.contract import StoppingContract

F64 = torch.float64
R = pn.StopReason
N = 40


def _system(n: int = N, dtype: torch.dtype = F64, noise: float = 0.1) -> KernelSystem:
    X = torch.rand(n, 2, generator=torch.Generator().manual_seed(0), dtype=F64).to(dtype)
    return KernelSystem(pn.kernels.RBF(lengthscale=0.5), X, noise)


def _rhs(n: int = N, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(1), dtype=F64).to(dtype)


def _run(stopping, system=None, policy=None, **kw):
    system = _system() if system is None else system
    solver = pn.ProbabilisticLinearSolver(policy or pn.policies.CG(), stopping)
    return system, list(solver.iterate(system, _rhs(system.n, system.dtype), **kw))


@pytest.mark.parametrize("budget", [1, 3, 5])
def test_an_integer_budget_allows_that_many_cg_iterations(budget):
    """One product ``K̂ s`` per iteration is one epoch: ``T`` epochs, ``T`` iterations."""
    system, states = _run(EpochBudget(budget))
    assert states[-1].iteration == budget and states[-1].stop_reason is R.BUDGET
    start = system.n  # the solver reads the diagonal (n entries) before the first iteration
    assert system.entries - start == budget * system.n**2


def test_a_fractional_budget_stops_once_it_is_reached():
    # 2.5 epochs: after 2 iterations 2 < 2.5 spent, the third reaches it
    _, states = _run(EpochBudget(2.5))
    assert states[-1].iteration == 3 and states[-1].stop_reason is R.BUDGET


def test_zero_budget_stops_before_the_first_iteration():
    _, states = _run(EpochBudget(0))
    assert len(states) == 1 and states[0].stop_reason is R.BUDGET


def test_the_count_is_the_operators_whatever_the_policy():
    """Unit-vector actions are products ``K̂ e_i`` too (one epoch each): the operator
    charges them, the criterion reads its count."""
    system, states = _run(EpochBudget(2), policy=pn.policies.UnitVector())
    assert states[-1].iteration == 2 and system.products == 2


def test_the_count_starts_with_the_solve():
    """Epochs spent before the solve, and a warm start's residual, are not charged."""
    system = _system()
    system.matmul(torch.ones(N, 3, dtype=F64))  # an epoch spent before
    x0 = torch.zeros(N, dtype=F64)
    x0[0] = 1.0
    _, states = _run(EpochBudget(2), system=system, x0=x0)
    assert states[-1].iteration == 2
    assert states[0].products == 1  # the residual b − K̂ x0, outside the budget


def test_composes_with_or_and_and():
    # either: the residual tolerance first on an easy system
    _, states = _run(EpochBudget(50) | ResidualNorm(rtol=1e-2))
    assert states[-1].stop_reason is R.CONVERGED and states[-1].iteration < 50
    # either: the budget first
    _, states = _run(EpochBudget(2) | ResidualNorm(rtol=1e-12))
    assert states[-1].stop_reason is R.BUDGET and states[-1].iteration == 2
    # both: the budget and at least 4 iterations
    _, states = _run(EpochBudget(2) & MaxIterations(4))
    assert states[-1].iteration == 4 and states[-1].stop_reason is R.BUDGET
    # not: stops at once (the budget is not yet spent)
    _, states = _run(~EpochBudget(2))
    assert len(states) == 1 and states[0].stop_reason is R.CRITERION


def test_epochs_and_matvecs_agree_for_one_column_actions():
    a = _run(EpochBudget(4))[1]
    b = _run(MatvecBudget(4))[1]
    assert a[-1].iteration == b[-1].iteration == 4
    assert torch.equal(a[-1].belief.mean, b[-1].belief.mean)


def test_needs_an_operator_that_counts_entries():
    A = torch.eye(5, dtype=F64) * 2
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), EpochBudget(1))
    with pytest.raises(TypeError, match="EpochBudget needs an operator that counts"):
        solver.solve(A, torch.ones(5, dtype=F64))


@pytest.mark.parametrize("budget", [-1, math.inf, math.nan, "3", True])
def test_bad_budget_is_refused(budget):
    with pytest.raises(ValueError, match="budget"):
        EpochBudget(budget)


def test_repr():
    assert repr(EpochBudget(2.5)) == "EpochBudget(2.5)"
    assert "EpochBudget(3)" in repr(EpochBudget(3) | MaxIterations(2))


class TestEpochBudgetContract(StoppingContract):
    """The stopping contract, solved on a KernelSystem (the contract's dense matrix
    counts no entries)."""

    def make(self, dtype):
        return EpochBudget(4)

    def _solve(self, dtype, stopping):
        system = _system(12, dtype, noise=0.5)
        solver = pn.ProbabilisticLinearSolver(
            pn.policies.UnitVector(), stopping | MaxIterations(36)
        )
        b = _rhs(12, dtype)
        return list(solver.iterate(system, b, generator=torch.Generator().manual_seed(0)))
