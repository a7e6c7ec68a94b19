"""Every built-in policy costs exactly one product with A per iteration."""

from __future__ import annotations

import pytest
import torch
from policy_helpers import make_problem, run

import pnsolve as pn
from pnsolve.testing import CountingOperator

P = pn.policies
_X = torch.rand(30, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)


def _policies():
    kernel = pn.kernels.RBF(lengthscale=0.3)
    return {
        "cg": P.CG(),
        "unit-sequential": P.UnitVector(),
        "unit-random": P.UnitVector("random"),
        "unit-pivot-block": P.UnitVector("pivot", block_size=3),
        "gaussian": P.Random(),
        "rademacher-block": P.Random("rademacher", block_size=2),
        "sparse-sign": P.Random("sparse_sign", nnz=3),
        "lanczos": P.Lanczos(),
        "pseudo-input": P.PseudoInput(kernel, _X, _X[:12]),
        "custom": P.Custom(lambda state: state.residual.sign()),
        "switch": P.Switch([P.UnitVector(), P.Lanczos(), P.CG()], at=[2, 5]),
        "mixed": P.Mixed([P.Random(), P.UnitVector("pivot"), P.Lanczos()], [1.0, 1.0, 1.0]),
    }


@pytest.mark.parametrize("name", list(_policies()))
def test_one_product_per_iteration(name: str) -> None:
    policy = _policies()[name]
    problem = make_problem(30, seed=1)
    A = CountingOperator(problem.A)
    belief, info = run(policy, A, problem.b, iterations=8)
    assert info.iterations == 8
    assert info.stop_reason is pn.StopReason.MAX_ITERATIONS
    assert A.matmat_calls == info.iterations == info.products
    assert A.rmatmat_calls == 0
    assert A.matvecs == info.matvecs
    assert bool(torch.isfinite(belief.mean).all())
