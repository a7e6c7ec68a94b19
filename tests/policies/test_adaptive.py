"""Every built-in policy says whether its actions may depend on ``b`` (``adaptive``)."""

from __future__ import annotations

import pytest
import torch
from policy_helpers import make_problem

import pnsolve as pn
from pnsolve.krylov import KrylovBuffer

P = pn.policies


def _buffer() -> KrylovBuffer:
    problem = make_problem(6)
    buffer = KrylovBuffer(pn.linops.as_linop(problem.A))
    pn.ProbabilisticLinearSolver(P.CG(), pn.stopping.MaxIterations(2)).solve(
        problem.A, problem.b, buffer=buffer
    )
    return buffer


X = torch.linspace(0, 1, 6, dtype=torch.float64).unsqueeze(-1)

ADAPTIVE = {
    "CG": lambda: P.CG(),
    "CG(preconditioner)": lambda: P.CG(preconditioner=torch.eye(6, dtype=torch.float64)),
    "Lanczos()": lambda: P.Lanczos(),
    "Lanczos(residual)": lambda: P.Lanczos(start="residual"),
    "UnitVector(pivot)": lambda: P.UnitVector("pivot"),
    "Recycled": lambda: P.Recycled(_buffer()),
    "Custom": lambda: P.Custom(lambda state: state.residual),
    "Switch(UnitVector, CG)": lambda: P.Switch([P.UnitVector(), P.CG()], at=[2]),
    "Mixed(Random, Lanczos())": lambda: P.Mixed([P.Random(), P.Lanczos()]),
    "Projected(CG)": lambda: P.Projected(P.CG(), torch.eye(6, dtype=torch.float64)),
}
NON_ADAPTIVE = {
    "UnitVector(sequential)": lambda: P.UnitVector("sequential"),
    "UnitVector(random)": lambda: P.UnitVector("random", block_size=2),
    "UnitVector(schur)": lambda: P.UnitVector("schur"),
    "Random(gaussian)": lambda: P.Random(),
    "Random(rademacher)": lambda: P.Random("rademacher"),
    "Random(sparse_sign)": lambda: P.Random("sparse_sign", nnz=2),
    "PseudoInput": lambda: P.PseudoInput(pn.kernels.RBF(lengthscale=0.3), X, X[:3]),
    "PivotedCholeskyActions": lambda: P.PivotedCholeskyActions(),
    "Lanczos(random)": lambda: P.Lanczos(start="random"),
    "Lanczos(tensor)": lambda: P.Lanczos(start=torch.ones(6, dtype=torch.float64)),
    "Recycled(adaptive=False)": lambda: P.Recycled(_buffer(), adaptive=False),
    "Custom(adaptive=False)": lambda: P.Custom(lambda state: state.residual, adaptive=False),
    "Switch(UnitVector, Lanczos(random))": lambda: P.Switch(
        [P.UnitVector(), P.Lanczos(start="random")], at=[2]
    ),
    "Mixed(Random, PivotedCholeskyActions)": lambda: P.Mixed(
        [P.Random(), P.PivotedCholeskyActions()]
    ),
    "Projected(Random)": lambda: P.Projected(P.Random(), torch.eye(6, dtype=torch.float64)),
}


@pytest.mark.parametrize("name", sorted(ADAPTIVE))
def test_adaptive_policies(name: str) -> None:
    policy = ADAPTIVE[name]()
    assert policy.adaptive is True


@pytest.mark.parametrize("name", sorted(NON_ADAPTIVE))
def test_non_adaptive_policies(name: str) -> None:
    policy = NON_ADAPTIVE[name]()
    assert policy.adaptive is False


def test_every_built_in_policy_class_is_covered() -> None:
    covered = {type(make()) for make in (*ADAPTIVE.values(), *NON_ADAPTIVE.values())}
    built_in = {
        getattr(P, name)
        for name in P.__all__
        if isinstance(getattr(P, name), type)
        and issubclass(getattr(P, name), P.Policy)
        and getattr(P, name) is not P.Policy
    }
    assert built_in <= covered, built_in - covered


def test_a_user_policy_is_adaptive_unless_it_says_otherwise() -> None:
    class Mine(P.Policy):
        def __call__(self, state, generator):
            return state.residual, None

    class Fixed(Mine):
        @property
        def adaptive(self) -> bool:
            return False

    assert Mine().adaptive and not Fixed().adaptive


def test_adaptive_keywords_are_checked() -> None:
    with pytest.raises(TypeError, match="adaptive"):
        P.Custom(lambda state: state.residual, adaptive="no")
    with pytest.raises(TypeError, match="adaptive"):
        P.Recycled(_buffer(), adaptive=0)
    assert repr(P.Custom(len, adaptive=False)) == "Custom(fn=len, adaptive=False)"
