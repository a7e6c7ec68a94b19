"""Jacobi preconditioner."""

from __future__ import annotations

import pytest
import torch

from pnsolve.preconditioners import Jacobi
from pnsolve.testing import exact_tol


def test_applies_inverse_diagonal(spd):
    A = spd(30, seed=1)
    P = Jacobi(A)
    X = torch.randn(30, 3, dtype=torch.float64)
    assert torch.allclose(P @ X, X / torch.diagonal(A).unsqueeze(-1))
    dense_P = torch.diag(torch.diagonal(A))
    assert torch.allclose(P.to_dense() @ dense_P, torch.eye(30, dtype=torch.float64),
                          atol=exact_tol(torch.float64))  # fmt: skip
    assert torch.allclose(P.logdet(), torch.logdet(dense_P))
    assert P.is_symmetric and P.is_psd and P.dtype == A.dtype


def test_float32_follows_dtype(spd):
    P = Jacobi(spd(10, dtype=torch.float32))
    assert (P @ torch.ones(10)).dtype == torch.float32


def test_rejects_nonpositive_diagonal():
    with pytest.raises(ValueError, match=r"A\[2, 2\]"):
        Jacobi(torch.diag(torch.tensor([1.0, 2.0, 0.0, 3.0])))
