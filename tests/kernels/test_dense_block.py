"""The no-autograd dense kernel block (in place, row chunks) against the differentiable one."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels.backends import tiling
from pnsolve.testing.tolerances import exact_tol

F64 = torch.float64


def _make(kind, **kw):
    return pn.kernels.RBF(**kw) if kind == "rbf" else pn.kernels.Matern(nu=kind, **kw)


@pytest.mark.parametrize("kind", ["rbf", 0.5, 1.5, 2.5])
@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_no_grad_block_matches_differentiable_block(kind, dtype, monkeypatch):
    # Small row chunks so that the blocks, the mirrored lower triangle and the Matérn
    # scratch buffer are all exercised on a small problem.
    monkeypatch.setattr(tiling, "DENSE_ROW_CHUNK", 7)
    g = torch.Generator().manual_seed(0)
    X1 = torch.randn(40, 3, generator=g, dtype=dtype)
    X2 = torch.randn(23, 3, generator=g, dtype=dtype)
    k = _make(kind, lengthscale=torch.tensor([0.5, 1.0, 2.0], dtype=dtype), outputscale=1.3)
    ref_cross, ref_sym = k(X1, X2), k(X1)  # parameters require grad: differentiable path
    assert ref_cross.requires_grad
    with torch.no_grad():
        cross, sym = k(X1, X2), k(X1)
    tol = exact_tol(dtype, 3) * 1.3
    assert cross.dtype == dtype and not cross.requires_grad
    assert float((cross - ref_cross.detach()).abs().max()) <= tol
    assert float((sym - ref_sym.detach()).abs().max()) <= tol
    assert torch.equal(sym, sym.mT)  # exactly symmetric
    assert torch.equal(
        sym.diagonal(), torch.full((40,), float(k.outputscale.detach()), dtype=dtype)
    )


def test_differentiable_path_taken_when_inputs_need_grad():
    k = pn.kernels.RBF(lengthscale=0.5)
    for p in k.parameters():
        p.requires_grad_(False)
    X = torch.randn(5, 2, dtype=F64, requires_grad=True)
    K = k(X)
    assert K.requires_grad
    K.sum().backward()
    assert X.grad is not None
    with torch.no_grad():
        torch.testing.assert_close(k(X), K.detach())
