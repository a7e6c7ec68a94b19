"""Randomized Nyström preconditioner."""

from __future__ import annotations

import pytest
import torch

from pnsolve.preconditioners import Nystrom
from pnsolve.testing import CountingOperator, exact_tol, krylov_tol

F64 = torch.float64


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _dense_P(ny: Nystrom) -> torch.Tensor:
    U, lam, mu = ny.U, ny.eigenvalues, ny.mu
    n = U.shape[0]
    eye = torch.eye(n, dtype=U.dtype)
    return (U * (lam + mu)) @ U.T / (lam[-1] + mu) + eye - U @ U.T


def test_inverse_times_P_is_identity(kernel):
    n = 120
    A = kernel(n)
    ny = Nystrom(A, 30, generator=_gen(), mu=1e-2)
    P = _dense_P(ny)
    assert torch.allclose(ny @ P, torch.eye(n, dtype=F64), atol=krylov_tol(F64, 10.0))
    assert torch.allclose(ny.diagonal(), torch.diagonal(ny.to_dense()))
    assert torch.allclose(ny.logdet(), torch.logdet(P), atol=exact_tol(F64, n))
    assert torch.allclose(ny.U.T @ ny.U, torch.eye(ny.rank, dtype=F64), atol=exact_tol(F64, n))


def test_exact_for_low_rank_matrices():
    g = _gen(1)
    U = torch.randn(80, 6, generator=g, dtype=F64)
    A = U @ U.T
    ny = Nystrom(A, 10, generator=_gen(2))
    assert ny.rank == 6  # zero eigenvalues are dropped when mu = 0
    approx = ny.approximation().to_dense()
    assert torch.allclose(approx, A, atol=1e3 * exact_tol(F64, 80) * float(A.abs().max()))


def test_one_block_product_and_reproducible(kernel):
    A = CountingOperator(__import__("pnsolve").linops.Dense(kernel(60)))
    a = Nystrom(A, 12, generator=_gen(7), mu=0.1)
    assert A.matmat_calls == 1 and A.matvecs == 12
    b = Nystrom(A, 12, generator=_gen(7), mu=0.1)
    c = Nystrom(A, 12, generator=_gen(8), mu=0.1)
    assert torch.equal(a.U, b.U) and torch.equal(a.eigenvalues, b.eigenvalues)
    assert not torch.equal(a.U, c.U)


def test_float32_and_validation(kernel):
    A = kernel(40, dtype=torch.float32)
    ny = Nystrom(A, 8, generator=_gen())
    assert ny.U.dtype == torch.float32 and (ny @ torch.ones(40)).dtype == torch.float32
    with pytest.raises(TypeError, match="generator"):
        Nystrom(A, 8, generator=0)
    with pytest.raises(TypeError, match="generator"):
        Nystrom(A, 8, generator=None)
    with pytest.raises(ValueError, match="rank"):
        Nystrom(A, 0, generator=_gen())
    assert Nystrom(A, 41, generator=_gen()).rank == 40  # capped at n: one rule for ranks
    with pytest.raises(ValueError, match="mu"):
        Nystrom(A, 8, generator=_gen(), mu=-1.0)
