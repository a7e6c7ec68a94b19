"""``I_C ⊗ K`` in class-major order against the dense block-diagonal matrix."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels import KernelMatrix
from pnsolve.linops import RepeatedBlockDiagonal
from pnsolve.testing import CountingOperator
from pnsolve.testing.contract import LinearOperatorContract


def _X(dtype):
    return torch.randn(9, 2, generator=torch.Generator().manual_seed(0), dtype=dtype)


class TestRepeatedKernel(LinearOperatorContract):
    def make(self, dtype):
        k = pn.kernels.RBF(lengthscale=torch.tensor(0.7, dtype=dtype)).requires_grad_(False)
        K = KernelMatrix(k, _X(dtype), backend="dense")
        return RepeatedBlockDiagonal(K, 3), torch.block_diag(*[k(_X(dtype))] * 3)


class TestRepeatedRectangular(LinearOperatorContract):
    def make(self, dtype):
        M = torch.randn(4, 6, generator=torch.Generator().manual_seed(1), dtype=dtype)
        D = torch.block_diag(M, M)
        return RepeatedBlockDiagonal(pn.linops.as_linop(M), 2), D

    has_diagonal = False


def test_one_product_with_the_block_per_product():
    K = CountingOperator(pn.linops.as_linop(torch.eye(5, dtype=torch.float64)))
    op = RepeatedBlockDiagonal(K, 4)
    op @ torch.ones(20, 3, dtype=torch.float64)
    assert K.products == 1


def test_bad_input():
    with pytest.raises(ValueError, match="copies"):
        RepeatedBlockDiagonal(pn.linops.as_linop(torch.eye(2)), 0)
    with pytest.raises(TypeError, match="K"):
        RepeatedBlockDiagonal(torch.eye(2), 2)
