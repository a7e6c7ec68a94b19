"""Fixtures for the Krylov tests: SPD matrices with named spectra, built locally."""

from __future__ import annotations

import pytest
import torch


def make_spd(
    n: int, spectrum: torch.Tensor | None = None, *, cond: float = 100.0, seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:  # fmt: skip
    """``Q diag(λ) Qᵀ``, random orthogonal ``Q``; default λ decays exponentially 1 → 1/cond."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    lam = torch.logspace(0, -torch.log10(torch.tensor(cond)).item(), n, dtype=torch.float64)
    lam = lam if spectrum is None else spectrum.to(torch.float64)
    A = (Q * lam) @ Q.T
    return (0.5 * (A + A.T)).to(dtype)


def make_kernel(n: int, noise: float = 1e-2, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    """RBF Gram matrix of ``n`` uniform points in [0, 1]² plus ``noise · I``."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64)
    K = torch.exp(-0.5 * torch.cdist(X, X).square() / 0.2**2)
    return (K + noise * torch.eye(n, dtype=torch.float64)).to(dtype)


@pytest.fixture
def spd():
    return make_spd


@pytest.fixture
def kernel():
    return make_kernel
