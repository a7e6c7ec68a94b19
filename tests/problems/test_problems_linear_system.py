"""LinearSystem: validation, residual, from_solution."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.problems import LinearSystem
from pnsolve.testing import exact_tol


def _A(n=4, dtype=torch.float64):
    M = torch.randn(n, n, generator=torch.Generator().manual_seed(0), dtype=dtype)
    return pn.linops.Dense(M @ M.mT + n * torch.eye(n, dtype=dtype), is_symmetric=True, is_psd=True)


@pytest.mark.parametrize("shape", [(4,), (4, 3)])
def test_from_solution_has_zero_residual(shape):
    A = _A()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    system = LinearSystem.from_solution(A, x, name="toy")
    assert system.name == "toy" and system.n == 4 and system.cond is None
    torch.testing.assert_close(system.b, A.to_dense() @ x)
    r = system.residual(x)
    assert r.shape == shape and float(r.abs().max()) <= exact_tol(torch.float64, 4)
    assert (
        float(system.residual(torch.zeros(shape, dtype=torch.float64)).sub(system.b).abs().max())
        == 0
    )


def test_validation_names_arguments():
    A = _A()
    b = torch.ones(4, dtype=torch.float64)
    with pytest.raises(TypeError, match="A must be"):
        LinearSystem(A=A.to_dense(), b=b)
    with pytest.raises(ValueError, match="b must have shape"):
        LinearSystem(A=A, b=torch.ones(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="b"):
        LinearSystem(A=A, b=b.float())
    with pytest.raises(ValueError, match="x_true"):
        LinearSystem(A=A, b=b, x_true=torch.ones(4, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="spectrum"):
        LinearSystem(A=A, b=b, spectrum=torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="square"):
        LinearSystem(A=pn.linops.Dense(torch.ones(4, 2, dtype=torch.float64)), b=b)
    with pytest.raises(ValueError, match="x must"):
        LinearSystem(A=A, b=b).residual(torch.ones(5, dtype=torch.float64))


def test_frozen():
    system = LinearSystem(A=_A(), b=torch.ones(4, dtype=torch.float64))
    with pytest.raises(AttributeError):
        system.name = "other"
