"""Pivoted partial Cholesky preconditioner: algebra, matrix-free access, Woodbury."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.linops import Closure, Dense
from pnsolve.preconditioners import PivotedCholesky
from pnsolve.testing import CountingOperator, exact_tol, krylov_tol
from pnsolve.testing.device import suite_device

F64 = torch.float64


def _dense_P(pc: PivotedCholesky) -> torch.Tensor:
    return pc.L @ pc.L.T + torch.diag(pc.D)


@pytest.mark.parametrize("shift", [None, 0.1])
def test_inverse_times_P_is_identity(kernel, shift):
    n = 150
    A = kernel(n, noise=1e-2)
    pc = PivotedCholesky(A, 20, shift=shift)
    P = _dense_P(pc)
    cond = float(torch.linalg.cond(P))
    eye = torch.eye(n, dtype=F64)
    assert torch.allclose(pc @ P, eye, atol=krylov_tol(F64, cond))
    X = torch.randn(n, 4, dtype=F64, generator=torch.Generator().manual_seed(0))
    ref = torch.linalg.solve(P, X)
    assert torch.allclose(pc @ X, ref, rtol=krylov_tol(F64, cond), atol=0)
    assert torch.allclose(pc.diagonal(), torch.diagonal(torch.linalg.inv(P)),
                          rtol=krylov_tol(F64, cond))  # fmt: skip
    assert torch.allclose(pc.logdet(), torch.logdet(P), rtol=exact_tol(F64, n))
    if shift is not None:
        assert torch.equal(pc.D, torch.full((n,), shift, dtype=F64))
    else:
        assert bool((pc.D >= 1e-2 * (1 - 1e-8)).all())  # Schur complement of K + σ²I ≥ σ²


def test_reads_only_diagonal_and_rank_columns(kernel):
    n, rank = 200, 15
    A = CountingOperator(Dense(kernel(n)))
    pc = PivotedCholesky(A, rank)
    assert A.diagonal_calls == 1
    assert A.rows_accessed == rank and A.row_block_calls == rank
    assert A.products == 0
    assert pc.rank == rank and pc.pivots.unique().numel() == rank
    assert bool((pc.residual_trace[1:] <= pc.residual_trace[:-1]).all())
    assert torch.allclose(pc.residual_trace[-1], pc.residual_diagonal.sum())


def test_full_rank_is_exact_cholesky(spd):
    n = 40
    A = spd(n, cond=100.0, seed=3)
    pc = PivotedCholesky(A, n)
    assert torch.allclose(pc.L @ pc.L.T, A, atol=exact_tol(F64, n))
    assert float(pc.residual_trace[-1]) <= exact_tol(F64, n) * float(A.trace())


def test_low_rank_stops_early():
    g = torch.Generator().manual_seed(4)
    U = torch.randn(50, 5, generator=g, dtype=F64)
    pc = PivotedCholesky(U @ U.T + 1e-20 * torch.eye(50, dtype=F64), 20)
    assert pc.rank == 5


def test_matrix_free_without_row_access_uses_unit_products(spd):
    n = 30
    A = spd(n, seed=5)
    op = CountingOperator(Closure(lambda X: A @ X, (n, n), dtype=F64, device=suite_device(),
                                  diagonal=lambda: torch.diagonal(A)))  # fmt: skip
    pc = PivotedCholesky(op, 6)
    assert op.products == 6 and op.matvecs == 6
    assert torch.allclose(pc.L, PivotedCholesky(A, 6).L)


def test_float32_and_validation(kernel):
    A = kernel(50, dtype=torch.float32)
    pc = PivotedCholesky(A, 10)
    assert (pc @ torch.ones(50)).dtype == torch.float32 and pc.L.dtype == torch.float32
    with pytest.raises(ValueError, match="rank"):
        PivotedCholesky(A, 0)
    # rank above n is capped at n (a full pivoted Cholesky), as for Lanczos and LOVE
    assert PivotedCholesky(A, 51).L.shape[1] <= 50
    with pytest.raises(TypeError, match="rank"):
        PivotedCholesky(A, 2.5)
    with pytest.raises(ValueError, match="shift"):
        PivotedCholesky(A, 5, shift=-1.0)
    with pytest.raises(ValueError, match="non-positive diagonal"):
        PivotedCholesky(-A, 5)


def test_kernel_use_with_shift_speeds_up_cg(kernel):
    n, noise = 300, 1e-3
    Khat = kernel(n, noise=noise)
    K = Khat - noise * torch.eye(n, dtype=F64)
    b = torch.ones(n, dtype=F64)
    _, plain = pn.cg(Khat, b, rtol=1e-8)
    _, pre = pn.cg(Khat, b, rtol=1e-8, M=PivotedCholesky(K, 50, shift=noise))
    assert pre.converged and pre.iterations < plain.iterations / 3
