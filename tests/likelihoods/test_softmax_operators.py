"""Softmax W and its closed-form pseudo-inverse W⁺: dense formulas, Moore–Penrose, O(nC).

Exactness claims are deterministic (tolerances from ``pnsolve.testing``); the
Moore–Penrose identities are algebra and get a hypothesis property test.
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from pnsolve.likelihoods import Softmax, SoftmaxHessian, SoftmaxHessianPinv
from pnsolve.testing import exact_tol
from pnsolve.testing.contract import LinearOperatorContract

F64 = torch.float64


def _probs(n: int, C: int, dtype: torch.dtype, seed: int = 0, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(scale * torch.randn(n, C, generator=g, dtype=F64), 1).to(dtype)


def _dense_W(p: torch.Tensor) -> torch.Tensor:
    """``diag(p_i) − p_i p_iᵀ`` blocks placed by the class-major rule ``(c, i) ↦ c·n + i``."""
    n, C = p.shape
    W = torch.zeros(C * n, C * n, dtype=p.dtype)
    for i in range(n):
        block = torch.diag(p[i]) - torch.outer(p[i], p[i])
        idx = torch.arange(C) * n + i
        W[idx.unsqueeze(1), idx.unsqueeze(0)] = block
    return W


def _dense_pinv(p: torch.Tensor) -> torch.Tensor:
    n, C = p.shape
    M = torch.zeros(C * n, C * n, dtype=p.dtype)
    P = torch.eye(C, dtype=p.dtype) - 1.0 / C
    for i in range(n):
        idx = torch.arange(C) * n + i
        M[idx.unsqueeze(1), idx.unsqueeze(0)] = P @ torch.diag(1 / p[i]) @ P
    return M


class TestSoftmaxHessianContract(LinearOperatorContract):
    has_other_dtype = False  # Newton's weights, built in the model's dtype

    def make(self, dtype):
        p = _probs(5, 3, dtype)
        return SoftmaxHessian(p), _dense_W(p)


class TestSoftmaxHessianPinvContract(LinearOperatorContract):
    has_other_dtype = False  # Newton's weights, built in the model's dtype

    def make(self, dtype):
        p = _probs(5, 3, dtype, seed=1)
        return SoftmaxHessianPinv(p), _dense_pinv(p)


def test_hessian_blocks_follow_the_class_major_layout():
    lik = Softmax(3)
    f = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=F64)
    y = torch.tensor([0, 1, 2, 1])
    W = lik.hessian(f, y).to_dense()
    p = torch.softmax(f, 1)
    for i in range(4):
        for a in range(3):
            for b in range(3):
                expected = p[i, a] * (a == b) - p[i, a] * p[i, b]
                assert abs(float(W[a * 4 + i, b * 4 + i] - expected)) <= exact_tol(F64)
    flat = lik.flatten(f)
    assert torch.equal(flat[:4], f[:, 0]) and torch.equal(lik.unflatten(flat), f)


def test_pinv_matches_torch_linalg_pinv():
    p = _probs(6, 4, F64, seed=2)
    W = SoftmaxHessian(p)
    dense = W.to_dense()
    lam = torch.linalg.eigvalsh(dense)
    nonzero = lam[lam > exact_tol(F64, dense.shape[0]) * lam.max()]
    cond = float(nonzero.max() / nonzero.min())
    ref = torch.linalg.pinv(dense, hermitian=True)
    M = W.pinv().to_dense()
    err = float((M - ref).abs().max())
    assert err <= exact_tol(F64, dense.shape[0]) * cond * float(ref.abs().max())
    # rank C − 1 per block: the null space is spanned by the per-point constant vectors
    assert int((lam > exact_tol(F64, dense.shape[0]) * lam.max()).sum()) == 6 * 3


@given(
    n=st.integers(1, 6),
    C=st.integers(2, 6),
    scale=st.floats(0.1, 3.0),
    seed=st.integers(0, 2**16),
    f32=st.booleans(),
)
def test_moore_penrose_identities(n, C, scale, seed, f32):
    dtype = torch.float32 if f32 else F64
    p = _probs(n, C, dtype, seed=seed, scale=scale)
    W, M = SoftmaxHessian(p), SoftmaxHessianPinv(p)
    x = torch.randn(C * n, 2, generator=torch.Generator().manual_seed(seed + 1), dtype=dtype)
    kappa = float(p.max() / p.min())
    tol = exact_tol(dtype, C) * kappa * float(x.abs().max())
    centred = (x.reshape(C, n, 2) - x.reshape(C, n, 2).mean(0)).reshape(C * n, 2)
    assert float((W @ (M @ (W @ x)) - W @ x).abs().max()) <= tol * float(p.max())
    assert float((M @ (W @ (M @ x)) - M @ x).abs().max()) <= tol / float(p.min())
    assert float((M @ (W @ x) - centred).abs().max()) <= tol  # W⁺W = P, the projector
    assert float((W @ (M @ x) - centred).abs().max()) <= tol


def test_large_n_applies_in_order_nc_without_dense_blocks():
    # (C·n)² = 10¹² entries: any densification would exhaust memory; only products run.
    n, C, dtype = 100_000, 10, torch.float32
    g = torch.Generator().manual_seed(0)
    f = torch.randn(n, C, generator=g, dtype=dtype)
    y = torch.randint(0, C, (n,), generator=g)
    lik = Softmax(C)
    W, M = lik.hessian(f, y), lik.noise(f, y)
    assert W.shape == (C * n, C * n) == M.shape
    x = torch.randn(C * n, generator=g, dtype=dtype)
    Wx = W @ x
    err = float((W @ (M @ Wx) - Wx).abs().max())
    p = torch.softmax(f, 1)
    kappa = float(p.max() / p.min())
    assert err <= exact_tol(dtype, C) * kappa * float(Wx.abs().max())
    ones = torch.ones(C * n, dtype=dtype)
    assert float((W @ ones).abs().max()) <= exact_tol(dtype, C)
    assert float((M @ ones).abs().max()) <= exact_tol(dtype, C) / float(p.min())
    X = torch.randn(C * n, 2, generator=g, dtype=dtype)
    assert (W @ X).shape == (C * n, 2)
    d = W.diagonal()
    assert torch.equal(d, (p * (1 - p)).mT.reshape(-1))
