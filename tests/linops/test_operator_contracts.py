"""Contract tests for the structured operators in pnsolve.linops."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

import pnsolve as pn
from pnsolve.linops import (
    BlockDiagonal,
    Closure,
    Dense,
    Diagonal,
    LowRank,
    Product,
    Scaled,
    ScaledIdentity,
    Sum,
    as_linop,
)
from pnsolve.testing.contract import LinearOperatorContract
from pnsolve.testing.device import suite_device


def _randn(*shape, dtype, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


class TestDense(LinearOperatorContract):
    def make(self, dtype):
        M = _randn(7, 7, dtype=dtype)
        return Dense(M), M.clone()


class TestDenseRectangular(LinearOperatorContract):
    has_diagonal = True

    def make(self, dtype):
        M = _randn(6, 4, dtype=dtype)
        return Dense(M), M.clone()


class TestDiagonal(LinearOperatorContract):
    def make(self, dtype):
        d = _randn(6, dtype=dtype)
        return Diagonal(d), torch.diag(d)


class TestScaledIdentity(LinearOperatorContract):
    def make(self, dtype):
        op = ScaledIdentity(5, 0.3, dtype=dtype, device=suite_device())
        return op, 0.3 * torch.eye(5, dtype=dtype)


class TestLowRankSymmetric(LinearOperatorContract):
    def make(self, dtype):
        U = _randn(8, 3, dtype=dtype)
        return LowRank(U), U @ U.mT


class TestLowRankGeneral(LinearOperatorContract):
    def make(self, dtype):
        U, V = _randn(8, 2, dtype=dtype), _randn(5, 2, dtype=dtype, seed=1)
        return LowRank(U, V), U @ V.mT


class TestClosure(LinearOperatorContract):
    has_other_dtype = False  # a function of fixed dtype
    has_rows = False

    def make(self, dtype):
        M = _randn(6, 6, dtype=dtype)
        op = Closure(
            lambda X: M @ X,
            (6, 6),
            dtype=dtype,
            rmatmat=lambda X: M.mT @ X,
            diagonal=lambda: torch.diagonal(M),
            device=suite_device(),
        )
        return op, M.clone()


class TestSum(LinearOperatorContract):
    def make(self, dtype):
        U = _randn(6, 2, dtype=dtype)
        d = _randn(6, dtype=dtype, seed=1).abs()
        return LowRank(U) + Diagonal(d), U @ U.mT + torch.diag(d)


class TestScaled(LinearOperatorContract):
    def make(self, dtype):
        M = _randn(5, 5, dtype=dtype)
        return 2.5 * Dense(M), 2.5 * M


class TestDifference(LinearOperatorContract):
    def make(self, dtype):
        M, N = _randn(5, 5, dtype=dtype), _randn(5, 5, dtype=dtype, seed=4)
        return Dense(M) - Dense(N), M - N


class TestBlockDiagonal(LinearOperatorContract):
    def make(self, dtype):
        A = _randn(3, 3, dtype=dtype)
        d = _randn(4, dtype=dtype, seed=1)
        return BlockDiagonal(Dense(A), Diagonal(d)), torch.block_diag(A, torch.diag(d))


class TestProduct(LinearOperatorContract):
    has_diagonal = False
    has_rows = False

    def make(self, dtype):
        A, B = _randn(4, 5, dtype=dtype), _randn(5, 3, dtype=dtype, seed=1)
        return Dense(A) @ Dense(B), A @ B


@pytest.mark.cpu_only(reason="SciPy operators are host (CPU) operators")
class TestScipyOperator(LinearOperatorContract):
    has_other_dtype = False  # a function of fixed dtype
    dtypes = (torch.float64,)
    has_diagonal = False
    has_rows = False

    def make(self, dtype):
        M = np.random.default_rng(0).standard_normal((6, 6))
        return as_linop(spla.aslinearoperator(M)), torch.from_numpy(M)


@pytest.mark.cpu_only(reason="SciPy operators are host (CPU) operators")
class TestScipySparse(LinearOperatorContract):
    has_other_dtype = False  # a function of fixed dtype
    dtypes = (torch.float64,)
    has_rows = False

    def make(self, dtype):
        M = sp.random(7, 7, density=0.4, random_state=0, format="csr") + sp.eye(7)
        return as_linop(M), torch.from_numpy(M.toarray())


def test_as_linop_passthrough_and_numpy():
    op = Diagonal(torch.ones(3, dtype=torch.float64))
    assert as_linop(op) is op
    arr = np.arange(9).reshape(3, 3)
    A = as_linop(arr)
    assert A.dtype == torch.float64 and A.shape == (3, 3)
    f32 = as_linop(np.eye(3, dtype=np.float32))
    assert f32.dtype == torch.float32


def test_as_linop_rejects_unknown_type():
    with pytest.raises(TypeError, match="as_linop"):
        as_linop("not a matrix")
    with pytest.raises(ValueError, match="2-D"):
        as_linop(torch.ones(3))


def test_symmetry_detection():
    S = _randn(4, 4, dtype=torch.float64)
    assert Dense(S + S.mT).is_symmetric
    assert not Dense(S).is_symmetric
    assert Dense(S + S.mT).T is not None


def test_missing_structure_is_an_error_not_a_densification():
    op = Closure(lambda X: X, (3, 3), dtype=torch.float64, device=suite_device())
    with pytest.raises(pn.MissingStructureError, match="to_dense"):
        op.diagonal()
    with pytest.raises(pn.MissingStructureError):
        op.row_block([0])


def test_closure_validates_its_callable_output():
    op = Closure(lambda X: X[:2], (3, 3), dtype=torch.float64, device=suite_device())
    with pytest.raises(ValueError, match="matmat"):
        op @ torch.ones(3, dtype=torch.float64)


def test_operand_type_and_device_errors():
    op = Dense(torch.eye(3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        op @ np.ones(3)
    with pytest.raises(ValueError, match="shape"):
        op @ torch.ones(3, 2, 1, dtype=torch.float64)


def test_incompatible_operands_are_named():
    a = Dense(torch.eye(3, dtype=torch.float64))
    b = Dense(torch.eye(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        Sum(a, b)
    c = Dense(torch.eye(3, dtype=torch.float32))
    with pytest.raises(TypeError, match="dtype"):
        Sum(a, c)
    with pytest.raises(ValueError, match="compose"):
        Product(a, b)


def test_scaled_keeps_autograd_to_a_tensor_scale():
    s = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    op = Scaled(Dense(torch.eye(3, dtype=torch.float64)), s)
    (op @ torch.ones(3, dtype=torch.float64)).sum().backward()
    assert float(s.grad) == 3.0


def test_row_index_validation():
    op = Dense(torch.eye(3, dtype=torch.float64))
    with pytest.raises(IndexError):
        op.row_block([3])
    with pytest.raises(ValueError, match="rows"):
        op.row_block(torch.tensor([0.5]))
    assert torch.equal(op.row_block([-1]), torch.eye(3, dtype=torch.float64)[[2]])


def test_left_multiplication():
    M = _randn(4, 3, dtype=torch.float64)
    op = Dense(M)
    x = _randn(4, dtype=torch.float64, seed=5)
    torch.testing.assert_close(x @ op, x @ M)
    X = _randn(2, 4, dtype=torch.float64, seed=6)
    torch.testing.assert_close(X @ op, X @ M)


def test_psd_flags():
    assert Diagonal(torch.ones(2)).is_psd
    assert not Diagonal(-torch.ones(2)).is_psd
    U = torch.ones(3, 1)
    assert (LowRank(U) + ScaledIdentity(3, 0.1)).is_psd
    assert not (-LowRank(U)).is_psd


class TestTorchSparse(LinearOperatorContract):
    has_other_dtype = False  # a function of fixed dtype
    has_diagonal = False
    has_rows = False

    def make(self, dtype):
        M = _randn(6, 6, dtype=dtype) * (
            torch.rand(6, 6, generator=torch.Generator().manual_seed(1)) < 0.5
        )
        return as_linop(M.to_sparse()), M
