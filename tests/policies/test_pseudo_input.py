"""Pseudo-input actions: kernel columns at Z, in order; validation."""

from __future__ import annotations

import pytest
import torch
from policy_helpers import actions, run

import pnsolve as pn
from pnsolve.testing import exact_tol, krylov_tol

P = pn.policies


def _kernel_system(n: int = 15, dtype=torch.float64, lengthscale: float = 0.4):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 2, generator=g, dtype=dtype)
    k = pn.kernels.RBF(lengthscale=lengthscale)
    with torch.no_grad():
        K = k(X, X) + 0.1 * torch.eye(n, dtype=dtype)
    b = torch.randn(n, generator=g, dtype=dtype)
    return k, X, K, b


@pytest.mark.parametrize("block_size", [1, 2])
def test_actions_are_kernel_columns_in_order(block_size: int) -> None:
    k, X, K, b = _kernel_system()
    Z = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=X.dtype)
    blocks = actions(P.PseudoInput(k, X, Z, block_size=block_size), K, b, 3)
    assert [S.shape[1] for S in blocks] == ([1, 1, 1] if block_size == 1 else [2, 2, 1])
    with torch.no_grad():
        expected = k(X, Z)
    S = torch.cat(blocks, dim=1)
    assert torch.allclose(S, expected[:, : S.shape[1]], rtol=0, atol=exact_tol(X.dtype))


def test_all_training_inputs_give_the_exact_solution_then_breakdown() -> None:
    k, X, K, b = _kernel_system(lengthscale=0.1)  # short lengthscale: independent columns
    belief, info = run(P.PseudoInput(k, X, X, block_size=4), K, b, 10)
    assert info.iterations == 4 and info.stop_reason is pn.StopReason.BREAKDOWN
    x = torch.linalg.solve(K, b)
    cond = float(torch.linalg.cond(K)) ** 2  # actions K_XX: the Gram matrix is K³
    assert float((belief.mean - x).norm() / x.norm()) <= krylov_tol(b.dtype, cond)


def test_inducing_point_mean() -> None:
    """With actions K_XZ the mean is K_XZ (K_ZX K̂ K_XZ)⁻¹ K_ZX b."""
    k, X, K, b = _kernel_system()
    Z = X[:4] + 0.05
    belief, _ = run(P.PseudoInput(k, X, Z), K, b, 4)
    with torch.no_grad():
        S = k(X, Z)
    x = S @ torch.linalg.solve(S.mT @ K @ S, S.mT @ b)
    cond = float(torch.linalg.cond(S.mT @ K @ S))
    assert float((belief.mean - x).norm() / x.norm()) <= krylov_tol(b.dtype, cond)


def test_bad_arguments() -> None:
    k, X, K, b = _kernel_system()
    with pytest.raises(TypeError, match="kernel"):
        P.PseudoInput("rbf", X, X)
    with pytest.raises(TypeError, match="Z"):
        P.PseudoInput(k, X, X.numpy())
    with pytest.raises(ValueError, match="Z"):
        P.PseudoInput(k, X, X[:, :1])
    with pytest.raises(ValueError, match="X"):
        P.PseudoInput(k, X[:, 0], X)
    with pytest.raises(TypeError, match="Z"):
        P.PseudoInput(k, X, X.float())
    with pytest.raises(ValueError, match="Z"):
        P.PseudoInput(k, X, torch.full_like(X, float("nan")))
    with pytest.raises(ValueError, match="block_size"):
        P.PseudoInput(k, X, X, block_size=0)
    with pytest.raises(ValueError, match="X has 14 points"):
        run(P.PseudoInput(k, X[:14], X), K, b, 2)
    with pytest.raises(TypeError, match="X"):
        run(P.PseudoInput(k, X.float(), X.float()), K, b, 2)
    assert "PseudoInput(kernel=" in repr(P.PseudoInput(k, X, X[:3]))
