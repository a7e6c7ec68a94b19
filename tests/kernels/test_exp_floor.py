"""The tile code's exponent floor: tiles agree with the unclamped kernel, none is subnormal.

Short lengthscales put tile exponents below ``log(finfo.tiny)``, where torch's CPU ``exp``
is 20–50× slower; the tile code clamps them at ``exp_floor`` (kernels/_exp.py).
"""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels import _exp, matern
from pnsolve.kernels._exp import clamped_exp_, exp_floor
from pnsolve.kernels.backends.tiling import dense_block, tiled_matmat
from pnsolve.testing.tolerances import exact_tol

DTYPES = (torch.float32,)  # float64 is not floored (kernels/_exp.py)


def _kernels() -> dict[str, pn.kernels.Kernel]:
    """Every kernel whose tile ends in an ``exp``, at lengthscales that reach the floor."""
    rbf = pn.kernels.RBF(lengthscale=0.05)
    return {
        "rbf": rbf,
        "matern12": pn.kernels.Matern(nu=0.5, lengthscale=0.005),
        "matern32": pn.kernels.Matern(nu=1.5, lengthscale=0.005),
        "matern52": pn.kernels.Matern(nu=2.5, lengthscale=0.005),
        "rq": pn.kernels.RationalQuadratic(alpha=200.0, lengthscale=1e-4),
        "periodic": pn.kernels.Periodic(lengthscale=0.05, period=1.3),
        "product": pn.kernels.RBF(lengthscale=0.1) * pn.kernels.Periodic(lengthscale=0.1),
        "scaled": 2.0 * pn.kernels.RBF(lengthscale=0.05),
        "sum": pn.kernels.RBF(lengthscale=0.05) + pn.kernels.Matern(nu=1.5, lengthscale=0.01),
    }


def _inputs(dtype: torch.dtype, n: int = 70) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    return torch.randn(n, 2, generator=g, dtype=torch.float64).to(dtype)


def _unclamped(k: pn.kernels.Kernel, X: torch.Tensor, X2: torch.Tensor | None) -> torch.Tensor:
    """The differentiable dense path (``profile``: ``torch.exp`` without any floor)."""
    with torch.enable_grad():
        return k(X.clone().requires_grad_(True), X2).detach()


def test_floor_is_one_place_derived_from_tiny():
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        tiny = torch.finfo(dtype).tiny
        floor = exp_floor(dtype)
        assert floor == pytest.approx(math.log(tiny) + 1 / 64)
        assert tiny <= math.exp(floor) < 1.02 * tiny
    assert exp_floor(torch.float32) == pytest.approx(-87.32, abs=0.01)
    assert exp_floor(torch.float64) == -math.inf


def test_float64_is_unchanged():
    s = torch.linspace(-800.0, 0.0, 1001, dtype=torch.float64)
    assert torch.equal(clamped_exp_(s.clone()), torch.exp(s))


@pytest.mark.parametrize("dtype", DTYPES)
def test_clamped_exp_changes_entries_by_less_than_tiny_and_is_never_subnormal(dtype):
    tiny = torch.finfo(dtype).tiny
    lo = 1.5 * math.log(tiny)
    s = torch.linspace(lo, 0.0, 20001, dtype=torch.float64)
    exact = torch.exp(s)  # float64 reference (subnormal/zero where the dtype's would be)
    out = clamped_exp_(s.to(dtype)).double()
    assert (out >= tiny).all()
    below = exact < math.exp(exp_floor(dtype))
    assert below.any() and (~below).any()
    assert ((out - exact)[below].abs() < 1.02 * tiny).all()
    rel = ((out - exact) / exact)[~below].abs().max()
    assert rel <= 4 * torch.finfo(dtype).eps * abs(lo)  # exp's conditioning: |x| eps


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(_kernels()))
def test_tiles_agree_with_unclamped_tiles(name, dtype, monkeypatch):
    """Floored tiles against the same tile code with the floor off (``−inf``).

    Entries differ only where the exact value is below ``exp(floor)``, by less than
    ``1.02 · tiny`` (Matérn: ``κ(T) < 1.8e5 · tiny``): equal at ``exact_tol``.
    """
    k = _kernels()[name].to(dtype).requires_grad_(False)
    X, Y = _inputs(dtype), _inputs(dtype, 50) + 0.3
    V = torch.randn(70, 3, dtype=dtype, generator=torch.Generator().manual_seed(1))
    tiny = torch.finfo(dtype).tiny
    floored = [dense_block(k, X, X2) for X2 in (None, Y)]
    prods = [tiled_matmat(k, X, X2, V[: b.shape[1]], (16, 24)) for X2, b in zip((None, Y), floored)]
    with monkeypatch.context() as m:
        m.setattr(_exp, "exp_floor", lambda dtype: -math.inf)
        m.setattr(matern, "exp_floor", lambda dtype: -math.inf)
        plain = [dense_block(k, X, X2) for X2 in (None, Y)]
        want = [b @ V[: b.shape[1]] for b in plain]
    scale = float(k.tile_scale(X))
    bound = (1.8e5 if name.startswith("matern") or name == "sum" else 1.02) * tiny * scale
    for b, p, f, w in zip(plain, prods, floored, want):
        assert (b.abs() < tiny).any(), "the lengthscale should reach the floor"
        assert (f - b).abs().max() < bound
        torch.testing.assert_close(f, b, rtol=exact_tol(dtype), atol=exact_tol(dtype) * scale)
        tol = exact_tol(dtype, X.shape[0]) * scale
        torch.testing.assert_close(p, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["rbf", "matern12", "matern32", "matern52", "rq", "periodic",
                                  "product"])  # fmt: skip
def test_tile_entries_are_never_subnormal(name, dtype):
    k = _kernels()[name].to(dtype).requires_grad_(False)
    X = _inputs(dtype)
    blk = dense_block(k, X, _inputs(dtype, 50) + 0.3) / k.tile_scale(X)
    tiny = torch.finfo(dtype).tiny
    assert (blk >= tiny).all()
    assert not (blk.abs() < tiny).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_chunked_and_dense_backends_agree_at_short_lengthscales(dtype):
    k = pn.kernels.RBF(lengthscale=0.05).to(dtype).requires_grad_(False)
    X = _inputs(dtype, 200)
    v = torch.randn(200, 2, dtype=dtype, generator=torch.Generator().manual_seed(2))
    chunked = pn.kernels.KernelMatrix(k, X, backend="chunked", tile=(32, 64)) @ v
    dense = pn.kernels.KernelMatrix(k, X, backend="dense") @ v
    tol = exact_tol(dtype, 200)
    torch.testing.assert_close(chunked, dense, rtol=tol, atol=tol)


def test_rbf_profile_slope_is_floored():
    k = pn.kernels.RBF(lengthscale=1.0)
    r2 = torch.tensor([0.0, 2.0, 400.0, 5000.0], dtype=torch.float32)
    kappa, slope = k.profile_slope_(r2.clone())
    assert slope == -0.5
    assert (kappa >= torch.finfo(torch.float32).tiny).all()
    torch.testing.assert_close(kappa[:2], torch.exp(-0.5 * r2[:2]))


def test_matern_profile_slope_is_floored():
    k = pn.kernels.Matern(nu=2.5, lengthscale=1.0)
    r2 = torch.tensor([0.0, 2.0, 1e4, 1e6], dtype=torch.float32)
    kappa, slope = k.profile_slope_(r2.clone())
    tiny = torch.finfo(torch.float32).tiny
    assert isinstance(slope, torch.Tensor)
    assert (kappa >= tiny).all() and (slope.abs() >= tiny).all()
    torch.testing.assert_close(kappa[:2], k.profile(r2[:2]))
