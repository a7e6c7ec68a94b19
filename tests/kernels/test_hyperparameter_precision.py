"""Hyperparameters given as Python floats are exact in float64.

They are stored in float64 whatever torch's default dtype, so with float64 data the
kernel matrix, its matrix-free products and an exact GP posterior equal the closed-form
formulas to rounding. Before, float32 storage turned ``lengthscale=1.3`` into
``1.29999995`` and ``0.1`` into ``0.1 (1 − 2.1e-7)``: kernel values off by up to 3e-4
relative.
"""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import exact_tol

F64, F32 = torch.float64, torch.float32
HYPERS = [(1.3, 0.7), (0.1, 2.0), (0.37, 1e-3), (25.0, 3.3)]


def _X(n=40, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g, dtype=F64) * 0.7


def _closed_form(kind, X1, X2, ls, os):
    """``outputscale · κ(r)`` from the textbook formulas, with explicit differences."""
    r = ((X1[:, None, :] - X2[None, :, :]) ** 2).sum(-1).sqrt() / ls
    if kind == "rbf":
        return os * torch.exp(-0.5 * r**2)
    nu = kind
    if nu == 0.5:
        return os * torch.exp(-r)
    if nu == 1.5:
        return os * (1 + math.sqrt(3) * r) * torch.exp(-math.sqrt(3) * r)
    return os * (1 + math.sqrt(5) * r + 5.0 / 3.0 * r**2) * torch.exp(-math.sqrt(5) * r)


def _kernel(kind, ls, os):
    if kind == "rbf":
        return pn.kernels.RBF(lengthscale=ls, outputscale=os)
    return pn.kernels.Matern(nu=kind, lengthscale=ls, outputscale=os)


@pytest.mark.parametrize("kind", ["rbf", 0.5, 1.5, 2.5])
@pytest.mark.parametrize(("ls", "os"), HYPERS)
def test_dense_and_matrix_free_equal_the_closed_form(kind, ls, os):
    X, Y = _X(), _X(30, seed=1)
    k = _kernel(kind, ls, os)
    ref = _closed_form(kind, X, Y, ls, os)
    # exp(−r²/2) turns a rounding error δ in r² into a relative error δ/2: the
    # closed form's own conditioning, r² ≤ max over the block
    cond = 1.0 + float(((X[:, None] - Y[None]) ** 2).sum(-1).max()) / ls**2
    tol = exact_tol(F64, X.shape[1]) * cond
    with torch.no_grad():
        for K in (k(X, Y), k.linop(X, Y).to_dense()):
            assert float(((K - ref).abs() / ref.abs().clamp_min(1e-300)).max()) <= tol
        v = torch.randn(30, generator=torch.Generator().manual_seed(2), dtype=F64)
        Kv = k.linop(X, Y, backend="chunked") @ v
        torch.testing.assert_close(Kv, ref @ v, rtol=tol, atol=tol * float(ref.abs().max()))


@pytest.mark.parametrize(("ls", "os"), HYPERS)
def test_float_hyperparameters_round_trip_to_a_few_ulps(ls, os):
    k = pn.kernels.RBF(lengthscale=ls, outputscale=os)
    assert k.raw_lengthscale.dtype == F64 and k.raw_outputscale.dtype == F64
    e = torch.finfo(F64).eps
    assert abs(float(k.lengthscale.detach()) - ls) <= 4 * e * ls
    assert abs(float(k.outputscale.detach()) - os) <= 4 * e * os
    k.lengthscale = ls  # the setter keeps the same precision
    assert abs(float(k.lengthscale.detach()) - ls) <= 4 * e * ls


def test_storage_does_not_follow_the_default_dtype():
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(F32)
        k = pn.kernels.Matern(nu=1.5, lengthscale=torch.tensor(0.3), outputscale=2)
    finally:
        torch.set_default_dtype(old)
    assert k.raw_lengthscale.dtype == F64
    # a float32 tensor value is exact in float64; its float32 rounding of 0.3 is kept
    assert float(k.lengthscale.detach()) == pytest.approx(
        float(torch.tensor(0.3, dtype=F32)), rel=1e-15
    )
    # float32 data still gets float32 kernel values
    assert k(_X().float()).dtype == F32


def test_exact_gp_posterior_equals_the_closed_form():
    X, Xs = _X(60), _X(20, seed=3)
    y = torch.sin(X.sum(1))
    ls, os, noise = 1.3, 0.7, 0.1
    gp = pn.gp.ExactGP(pn.kernels.RBF(lengthscale=ls, outputscale=os), noise=noise).fit(X, y)
    post = gp.posterior(Xs)
    K = _closed_form("rbf", X, X, ls, os) + noise * torch.eye(60, dtype=F64)
    Ks = _closed_form("rbf", Xs, X, ls, os)
    mean = Ks @ torch.linalg.solve(K, y)
    var = os - (Ks * torch.linalg.solve(K, Ks.mT).mT).sum(1)
    cond = float(torch.linalg.cond(K))
    tol = exact_tol(F64, 60) * cond
    torch.testing.assert_close(
        post.mean.detach(), mean, rtol=tol, atol=tol * float(mean.abs().max())
    )
    torch.testing.assert_close(post.var.detach(), var, rtol=tol, atol=tol * os)
