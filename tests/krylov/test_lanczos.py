"""Lanczos: Ritz values, orthogonality, early termination, validation."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.linops import Closure
from pnsolve.testing import CountingOperator, exact_tol, krylov_tol
from pnsolve.testing.device import suite_device

F64 = torch.float64


def _v(n, seed=3, dtype=F64):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=F64).to(dtype)


def test_full_run_reproduces_spectrum(spd):
    n = 60
    A = spd(n, cond=1e3)
    res = pn.lanczos(A, _v(n), n)
    Q, T = res[:2]
    assert Q.shape == (n, n) and T.shape == (n, n)
    ritz = torch.linalg.eigvalsh(T)
    assert torch.allclose(ritz, torch.linalg.eigvalsh(A), rtol=0, atol=krylov_tol(F64))
    assert torch.allclose(T, Q.T @ A @ Q, atol=exact_tol(F64, n))


def test_extreme_ritz_values_converge(spd):
    n = 300
    lam = torch.cat([torch.tensor([10.0, 8.0, 6.0], dtype=F64), torch.linspace(1, 2, n - 3)])
    A = spd(n, lam, seed=1)
    res = pn.lanczos(A, _v(n), 40)
    ritz = torch.linalg.eigvalsh(res.T)
    assert torch.allclose(ritz[-3:], torch.tensor([6.0, 8.0, 10.0], dtype=F64), rtol=1e-10)
    assert abs(float(ritz[0]) - 1.0) < 1e-2  # the bottom of a dense cluster converges slower
    assert not res.breakdown and res.alpha.shape == (40,) and res.beta.shape == (39,)


def test_three_term_relation_and_one_product_per_step(spd):
    n, k = 100, 25
    A = CountingOperator(pn.linops.Dense(spd(n, seed=2)))
    Q, T, alpha, beta, beta_next, _breakdown = pn.lanczos(A, _v(n), k)
    assert A.matmat_calls == k
    M = A.op.matrix
    R = M @ Q - Q @ T  # = beta_next q_{k+1} e_kᵀ
    assert float(R[:, :-1].abs().max()) <= exact_tol(F64, n) * float(M.abs().max()) * 10
    assert torch.allclose(R[:, -1].norm(), beta_next, rtol=1e-8)
    assert torch.allclose(torch.diagonal(T), alpha) and torch.allclose(torch.diagonal(T, 1), beta)


def test_full_reorthogonalisation_keeps_q_orthonormal(spd):
    n, k = 400, 120
    A = spd(n, cond=1e6, seed=4)  # converging Ritz values destroy orthogonality without reorth
    eye = torch.eye(k, dtype=F64)
    full = pn.lanczos(A, _v(n), k)
    none = pn.lanczos(A, _v(n), k, reorth="none")
    err_full = float((full.Q.T @ full.Q - eye).abs().max())
    err_none = float((none.Q.T @ none.Q - eye).abs().max())
    assert err_full <= exact_tol(F64, n)
    assert err_none > 1e3 * err_full


def test_early_stop_on_few_distinct_eigenvalues(spd):
    n = 80
    distinct = torch.tensor([1.0, 2.0, 5.0, 7.0, 11.0], dtype=F64)
    A = spd(n, distinct.repeat_interleave(16), seed=5)
    for reorth in ("full", "none"):
        res = pn.lanczos(A, _v(n), 30, reorth=reorth)
        assert res.breakdown and res.Q.shape == (n, 5) and res.T.shape == (5, 5)
        assert torch.allclose(torch.linalg.eigvalsh(res.T), distinct, atol=krylov_tol(F64))


def test_float32_and_k_clipping(spd):
    n = 30
    A = spd(n, seed=6, dtype=torch.float32)
    res = pn.lanczos(A, _v(n, dtype=torch.float32), 100)
    assert res.Q.dtype == torch.float32 and res.Q.shape[1] <= n
    eye = torch.eye(res.Q.shape[1])
    assert float((res.Q.T @ res.Q - eye).abs().max()) <= exact_tol(torch.float32, n)


def test_matrix_free_operator_accepted(spd):
    n = 50
    A = spd(n, seed=7)
    op = Closure(
        lambda X: A @ X, (n, n), dtype=F64, device=suite_device()
    )  # symmetry flag unknown (False)
    res = pn.lanczos(op, _v(n), 10)
    assert torch.allclose(res.T, pn.lanczos(A, _v(n), 10).T, atol=exact_tol(F64, n))


def test_bad_input(spd):
    A = spd(20, seed=8)
    v = _v(20)
    with pytest.raises(ValueError, match="reorth"):
        pn.lanczos(A, v, 5, reorth="partial")
    with pytest.raises(ValueError, match="v must be nonzero"):
        pn.lanczos(A, torch.zeros(20, dtype=F64), 5)
    bad = v.clone()
    bad[0] = float("nan")
    with pytest.raises(ValueError, match="v contains NaN"):
        pn.lanczos(A, bad, 5)
    with pytest.raises(ValueError, match="v must have shape"):
        pn.lanczos(A, torch.ones(20, 2, dtype=F64), 5)
    with pytest.raises(TypeError, match="v has dtype"):
        pn.lanczos(A, v.float(), 5)
    with pytest.raises(ValueError, match="k must be at least 1"):
        pn.lanczos(A, v, 0)
    with pytest.raises(TypeError, match="k must be an int"):
        pn.lanczos(A, v, 2.0)
    with pytest.raises(ValueError, match="A must be symmetric"):
        pn.lanczos(A + torch.triu(torch.ones_like(A), 1), v, 5)
