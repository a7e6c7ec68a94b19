"""``problinsolve`` builds the built-in policies from their names."""

from __future__ import annotations

import pytest
import torch
from policy_helpers import make_problem

import pnsolve as pn
from pnsolve.solvers.problinsolve import _policy_from_name
from pnsolve.testing import krylov_tol


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("cg", pn.policies.CG),
        ("CG", pn.policies.CG),
        ("unitvector", pn.policies.UnitVector),
        ("random", pn.policies.Random),
        ("lanczos", pn.policies.Lanczos),
    ],
)
def test_names(name: str, cls: type) -> None:
    assert type(_policy_from_name(name, None)) is cls
    problem = make_problem(10, cond=10.0)
    belief, _info = pn.problinsolve(
        problem.A, problem.b, policy=name, rtol=1e-8, generator=torch.Generator().manual_seed(0)
    )
    err = (belief.mean - problem.x_true).norm() / problem.x_true.norm()
    assert float(err) <= krylov_tol(torch.float64, 10.0) + 10.0 * 1e-8


def test_unknown_name_lists_the_known_ones() -> None:
    problem = make_problem(4)
    with pytest.raises(ValueError, match=r"lanczos.*random.*unitvector"):
        pn.problinsolve(problem.A, problem.b, policy="gmres")
    policy = pn.policies.UnitVector("pivot")
    assert _policy_from_name(policy, None) is policy
