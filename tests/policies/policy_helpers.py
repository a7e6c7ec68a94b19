"""Shared helpers for the policy tests: small SPD problems and one-call solves.

A plain module with a unique name (imported by the test files, which pytest puts on
``sys.path``); not a conftest, so it cannot clash with other directories' conftests.
"""

from __future__ import annotations

import torch

import pnsolve as pn


def make_problem(n: int = 12, cond: float = 100.0, seed: int = 0, dtype=torch.float64):
    """An exponential-decay SPD system with known solution."""
    g = torch.Generator().manual_seed(seed)
    return pn.problems.exponential_decay(n, cond=cond, generator=g, dtype=dtype)


def run(policy, A, b, iterations: int, seed: int | None = 0, **kwargs):
    """``solve`` with ``MaxIterations(iterations)`` and a seeded generator (or none)."""
    g = None if seed is None else torch.Generator().manual_seed(seed)
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(iterations))
    return solver.solve(A, b, generator=g, **kwargs)


def actions(policy, A, b, iterations: int, seed: int | None = 0) -> list[torch.Tensor]:
    """The action blocks ``(n, m)`` the solver received, in order."""
    g = None if seed is None else torch.Generator().manual_seed(seed)
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(iterations))
    return [s.action for s in solver.iterate(A, b, generator=g) if s.action is not None]
