"""Toeplitz (1- and multilevel), Kronecker and sparse interpolation operators (SKI's pieces)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pnsolve.linops import Dense, Kronecker, SparseInterpolation, Toeplitz
from pnsolve.testing import exact_tol
from pnsolve.testing.contract import LinearOperatorContract

pytestmark = pytest.mark.usefixtures("one_thread")


def _randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _toeplitz_dense(column: torch.Tensor) -> torch.Tensor:
    """Reference: entries c[|i − j|] per level, built with loops over multi-indices."""
    shape = column.shape
    idx = torch.cartesian_prod(*[torch.arange(s) for s in shape]).reshape(-1, len(shape))
    m = idx.shape[0]
    D = torch.empty(m, m, dtype=column.dtype)
    for a in range(m):
        for b in range(m):
            D[a, b] = column[tuple((idx[a] - idx[b]).abs().tolist())]
    return D


class TestToeplitz1D(LinearOperatorContract):
    def make(self, dtype):
        c = _randn(9, dtype=dtype)
        return Toeplitz(c), _toeplitz_dense(c)


class TestToeplitzMultilevel(LinearOperatorContract):
    def make(self, dtype):
        c = _randn(3, 4, 2, dtype=dtype, seed=1)
        return Toeplitz(c), _toeplitz_dense(c)


class TestKronecker(LinearOperatorContract):
    def make(self, dtype):
        A, B = _randn(3, 3, dtype=dtype), _randn(4, 4, dtype=dtype, seed=1)
        T = Toeplitz(_randn(2, dtype=dtype, seed=2))
        return Kronecker(Dense(A), T, Dense(B)), torch.kron(torch.kron(A, T.to_dense()), B)


class TestKroneckerRectangular(LinearOperatorContract):
    has_diagonal = False

    def make(self, dtype):
        A, B = _randn(3, 2, dtype=dtype), _randn(2, 4, dtype=dtype, seed=1)
        return Kronecker(Dense(A), Dense(B)), torch.kron(A, B)


class TestSparseInterpolation(LinearOperatorContract):
    def make(self, dtype):
        g = torch.Generator().manual_seed(3)
        idx = torch.randint(0, 7, (6, 4), generator=g)
        val = torch.randn(6, 4, generator=g, dtype=dtype)
        D = torch.zeros(6, 7, dtype=dtype)
        for i in range(6):
            for a in range(4):
                D[i, idx[i, a]] += val[i, a]  # repeated indices add up
        return SparseInterpolation(idx, val, 7), D


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    decay=st.floats(0.05, 3.0),
    seed=st.integers(0, 2**16),
)
def test_toeplitz_kernel_grid_matches_dense(shape, decay, seed):
    """Multilevel Toeplitz of a stationary kernel on a grid = the dense kernel matrix (f64)."""
    grids = [torch.arange(s, dtype=torch.float64) for s in shape]
    offsets = torch.meshgrid(*grids, indexing="ij")
    column = torch.exp(-decay * sum(o * o for o in offsets))  # RBF on a unit grid
    T = Toeplitz(column, is_psd=True)
    U = torch.cartesian_prod(*grids).reshape(-1, len(shape))
    D = torch.exp(-decay * torch.cdist(U, U) ** 2)
    X = _randn(T.shape[0], 3, seed=seed)
    err = float((T @ X - D @ X).abs().max())
    assert err <= exact_tol(torch.float64, T.shape[0]) * max(1.0, float((D @ X).abs().max()))


def test_toeplitz_large_matches_dense_to_1e12():
    """A 2-level Toeplitz of size 60 × 50 = 3000: products equal dense to 1e-12 relative."""
    g0, g1 = torch.arange(60.0, dtype=torch.float64), torch.arange(50.0, dtype=torch.float64)
    a, b = torch.meshgrid(g0 * 0.1, g1 * 0.07, indexing="ij")
    r = torch.sqrt(a * a + b * b)
    column = (1 + 3**0.5 * r) * torch.exp(-(3**0.5) * r)  # Matérn 3/2: not separable
    T = Toeplitz(column)
    D = T.row_block(slice(None))
    X = _randn(3000, 2)
    rel = float((T @ X - D @ X).norm() / (D @ X).norm())
    assert rel < 1e-12


def test_kronecker_of_toeplitz_is_the_separable_grid_kernel():
    """RBF on a 2-D grid: Kronecker of 1-level Toeplitz = multilevel Toeplitz."""
    c0 = torch.exp(-0.3 * torch.arange(7.0, dtype=torch.float64) ** 2)
    c1 = torch.exp(-0.3 * (0.5 * torch.arange(5.0, dtype=torch.float64)) ** 2)
    K = Kronecker(Toeplitz(c0), Toeplitz(c1))
    M = Toeplitz(c0.unsqueeze(1) * c1.unsqueeze(0))
    X = _randn(35, 4)
    assert torch.allclose(K @ X, M @ X, rtol=0, atol=1e-13)
    assert K.is_symmetric and not K.is_psd
    assert Kronecker(Toeplitz(c0, is_psd=True), Toeplitz(c1, is_psd=True)).is_psd


def test_toeplitz_autograd_reaches_column():
    """d(uᵀ T(c) v)/dc: autograd through the FFT equals the dense expression's."""
    c = _randn(3, 4, seed=5).requires_grad_()
    u, v = _randn(12, seed=6), _randn(12, seed=7)
    (u @ (Toeplitz(c) @ v)).backward()
    c2 = c.detach().clone().requires_grad_()
    (u @ (_toeplitz_dense(c2) @ v)).backward()
    assert torch.allclose(c.grad, c2.grad, atol=1e-12)


def test_sparse_interpolation_autograd_reaches_operand():
    """Gradients of products with W and Wᵀ reach the dense operand."""
    idx = torch.tensor([[0, 2], [1, 3], [2, 3]])
    val = _randn(3, 2)
    W = SparseInterpolation(idx, val, 4)
    F = _randn(4, 2, seed=1).requires_grad_()
    (W @ F).sum().backward()
    assert torch.allclose(F.grad, W.rmatmat(torch.ones(3, 2, dtype=torch.float64)))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"column": torch.tensor(1.0)}, ValueError, "column"),
        ({"column": torch.tensor([1, 2])}, TypeError, "column"),
        ({"column": torch.tensor([1.0, float("nan")])}, ValueError, "column"),
    ],
)
def test_toeplitz_rejects_bad_column(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Toeplitz(**kwargs)


def test_kronecker_rejects_bad_factors():
    with pytest.raises(ValueError, match="at least one"):
        Kronecker()
    with pytest.raises(TypeError, match="factor 1"):
        Kronecker(Dense(torch.eye(2, dtype=torch.float64)), torch.eye(2))
    with pytest.raises(TypeError, match="dtype"):
        Kronecker(Dense(torch.eye(2, dtype=torch.float64)), Dense(torch.eye(2)))


@pytest.mark.parametrize(
    ("indices", "values", "m", "exc", "match"),
    [
        (torch.tensor([[0, 5]]), torch.ones(1, 2), 4, ValueError, "indices must lie"),
        (torch.tensor([[0.0, 1.0]]), torch.ones(1, 2), 4, TypeError, "indices"),
        (torch.tensor([[0, 1]]), torch.ones(1, 3), 4, ValueError, "shape"),
        (torch.tensor([[0, 1]]), torch.tensor([[1.0, float("inf")]]), 4, ValueError, "values"),
        (torch.tensor([[0, 1]]), torch.ones(1, 2), 0, ValueError, "num_columns"),
    ],
)
def test_sparse_interpolation_rejects_bad_input(indices, values, m, exc, match):
    with pytest.raises(exc, match=match):
        SparseInterpolation(indices, values, m)
