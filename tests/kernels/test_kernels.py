"""Stationary kernels against hand-written formulas; validation; parametrisation; gradients."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.testing.tolerances import exact_tol

F64 = torch.float64


def _randn(*shape, dtype=F64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _pairwise_r(X1, X2, ls):
    """Reference ``r_ij = ‖(x_i − x'_j) / ℓ‖`` by explicit differences."""
    diff = (X1[:, None, :] - X2[None, :, :]) / ls
    return diff.pow(2).sum(-1).sqrt()


REFERENCE = {
    "rbf": lambda r: torch.exp(-0.5 * r**2),
    0.5: lambda r: torch.exp(-r),
    1.5: lambda r: (1 + math.sqrt(3) * r) * torch.exp(-math.sqrt(3) * r),
    2.5: lambda r: (1 + math.sqrt(5) * r + 5 * r**2 / 3) * torch.exp(-math.sqrt(5) * r),
}


def _make(kind, **kw):
    return pn.kernels.RBF(**kw) if kind == "rbf" else pn.kernels.Matern(nu=kind, **kw)


def _assert_close(a, b, n=1):
    tol = exact_tol(a.dtype, n) * max(1.0, float(b.abs().max()))
    assert float((a - b).abs().max()) <= tol


@pytest.mark.parametrize("kind", ["rbf", 0.5, 1.5, 2.5])
@pytest.mark.parametrize("ard", [False, True])
def test_matches_hand_written_formula(kind, ard):
    ls = torch.tensor([0.4, 1.3, 2.0], dtype=F64) if ard else torch.tensor(0.7, dtype=F64)
    k = _make(kind, lengthscale=ls, outputscale=torch.tensor(1.7, dtype=F64))
    X1, X2 = _randn(9, 3), _randn(6, 3, seed=1)
    with torch.no_grad():
        _assert_close(k(X1, X2), 1.7 * REFERENCE[kind](_pairwise_r(X1, X2, ls)), 3)
        K = k(X1)
        _assert_close(K, 1.7 * REFERENCE[kind](_pairwise_r(X1, X1, ls)), 3)
        assert torch.equal(torch.diagonal(K), torch.full((9,), float(k.outputscale), dtype=F64))
        assert torch.equal(K, K.mT)
        _assert_close(k.diag(X1), torch.diagonal(K))


def test_ard_dims_broadcasts_a_scalar():
    k = pn.kernels.RBF(lengthscale=0.5, ard_dims=4)
    assert k.ard_dims == 4 and k.lengthscale.shape == (4,)
    expected = torch.full((4,), 0.5, dtype=torch.float64).to(k.lengthscale.device)
    torch.testing.assert_close(k.lengthscale, expected)
    with pytest.raises(ValueError, match="X1"):
        k(torch.zeros(3, 2))
    with pytest.raises(ValueError, match="ard_dims"):
        pn.kernels.RBF(lengthscale=torch.ones(3), ard_dims=4)


@pytest.mark.parametrize("kind", ["rbf", 1.5])
def test_dtype_follows_input_and_grads_reach_parameters(kind):
    k = _make(kind, lengthscale=0.8)  # parameters stored in float64, cast to X's dtype
    for dtype in (torch.float32, torch.float64):
        X = _randn(5, 2, dtype=dtype)
        K = k(X)
        assert K.dtype == dtype and K.device == X.device
        assert k.diag(X).dtype == dtype
        K.sum().backward()
        assert k.raw_lengthscale.grad is not None and k.raw_outputscale.grad is not None
        assert torch.isfinite(k.raw_lengthscale.grad).all()
        k.zero_grad()


def test_softplus_parametrisation_is_positive_and_settable():
    k = pn.kernels.Matern(2.5, lengthscale=0.3, outputscale=2.0)
    assert isinstance(k.raw_lengthscale, torch.nn.Parameter)
    dev = k.lengthscale.device  # a kernel's parameters live where it was built (the CPU)
    torch.testing.assert_close(k.lengthscale, torch.tensor(0.3, dtype=torch.float64).to(dev))
    torch.testing.assert_close(k.outputscale, torch.tensor(2.0, dtype=torch.float64).to(dev))
    with torch.no_grad():
        k.raw_lengthscale.fill_(-30.0)  # any raw value maps to a positive lengthscale
    assert float(k.lengthscale.detach()) > 0
    k.lengthscale = 1.5
    torch.testing.assert_close(k.lengthscale, torch.tensor(1.5, dtype=torch.float64).to(dev))
    k.outputscale = torch.tensor(0.25)  # a tensor on any device is copied into the parameter
    torch.testing.assert_close(k.outputscale, torch.tensor(0.25, dtype=torch.float64).to(dev))
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="lengthscale"):
            pn.kernels.RBF(lengthscale=bad)
        with pytest.raises(ValueError, match="outputscale"):
            k.outputscale = bad


def test_bad_nu_is_named():
    for nu in (1.0, 3.5, "1.5", True):
        with pytest.raises(ValueError, match="nu"):
            pn.kernels.Matern(nu=nu)


def test_bad_inputs_name_the_argument():
    k = pn.kernels.RBF()
    X = _randn(4, 2)
    with pytest.raises(TypeError, match="X1"):
        k([[0.0, 1.0]])
    with pytest.raises(ValueError, match="X1"):
        k(torch.zeros(4, dtype=F64))
    with pytest.raises(TypeError, match="X1"):
        k(torch.zeros(4, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="X2"):
        k(X, _randn(3, 3))
    with pytest.raises(TypeError, match="X2"):
        k(X, _randn(3, 2, dtype=torch.float32))
    bad = X.clone()
    bad[1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"X2.*NaN"):
        k(X, bad)
    bad[1, 0] = float("inf")
    with pytest.raises(ValueError, match=r"X1.*Inf"):
        k(bad)


@pytest.mark.parametrize("kind", ["rbf", 0.5, 1.5, 2.5])
def test_gradients_finite_at_zero_distance(kind):
    k = _make(kind, lengthscale=torch.tensor([0.5, 2.0], dtype=F64))
    X = _randn(4, 2).requires_grad_(True)
    Y = torch.cat([X.detach()[:2], _randn(2, 2, seed=3)]).requires_grad_(True)  # duplicates
    (k(X).sum() + k(X, Y).sum()).backward()
    for t in (X.grad, Y.grad, k.raw_lengthscale.grad, k.raw_outputscale.grad):
        assert t is not None and torch.isfinite(t).all()


@pytest.mark.parametrize("kind", ["rbf", 2.5])
def test_gradcheck_dense_kernel(kind):
    k = _make(kind, lengthscale=torch.tensor([0.7, 1.1], dtype=F64))
    k = k.double()
    X1, X2 = _randn(5, 2).requires_grad_(True), _randn(4, 2, seed=1).requires_grad_(True)
    params = tuple(k.parameters())
    assert torch.autograd.gradcheck(lambda a, b, *p: k(a, b), (X1, X2, *params))


def test_linop_returns_kernel_matrix():
    k = pn.kernels.RBF(lengthscale=0.5)
    X = _randn(7, 3)
    K = k.linop(X, backend="chunked")
    assert isinstance(K, pn.kernels.KernelMatrix) and K.backend == "chunked"
    assert K.shape == (7, 7) and K.is_symmetric and K.is_psd


@pytest.mark.cpu_only(reason="places parameters on torch's lazy device, a second device")
def test_a_number_hyperparameter_joins_the_tensor_ones_device():
    pytest.importorskip("torch._lazy.ts_backend")
    from pnsolve.testing.device import lazy_device

    lazy = lazy_device()
    ls = torch.tensor([0.5, 1.0], dtype=torch.float64).to(lazy)
    k = pn.kernels.Matern(1.5, lengthscale=ls, outputscale=2.0)
    assert {p.device.type for p in k.parameters()} == {"lazy"}
    k = pn.kernels.RBF(lengthscale=0.3, outputscale=torch.tensor(2.0).to(lazy))
    assert {p.device.type for p in k.parameters()} == {"lazy"}
    with pytest.raises(ValueError, match="lengthscale is on device"):
        pn.kernels.RBF(lengthscale=ls, outputscale=torch.tensor(2.0))


@pytest.mark.parametrize(
    "make",
    [lambda: pn.kernels.RBF(lengthscale=0.5), lambda: pn.kernels.Matern(1.5, lengthscale=0.5),
     lambda: pn.kernels.Matern(2.5, lengthscale=0.5), lambda: pn.kernels.Matern(0.5)],
)  # fmt: skip
def test_the_closed_form_profile_slope_is_the_derivative(make):
    k = make()
    r2 = torch.linspace(0.0, 9.0, 37, dtype=torch.float64)
    if not k.has_profile_slope:
        with pytest.raises(NotImplementedError, match="slope"):
            k.profile_slope_(r2.clone())
        return
    kappa, slope = k.profile_slope_(r2.clone())
    slope = slope * kappa if isinstance(slope, float) else slope
    x = r2.clone().requires_grad_(True)
    value = k.profile(x)
    (grad,) = torch.autograd.grad(value.sum(), x)
    tol = exact_tol(torch.float64, 8)
    torch.testing.assert_close(kappa, value.detach(), rtol=tol, atol=tol)
    # the autograd derivative through √r² is not finite-safe at r² = 0: compare r² > 0
    torch.testing.assert_close(slope[1:], grad[1:], rtol=tol, atol=tol)
