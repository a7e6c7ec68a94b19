"""KernelMatrix with the KeOps backend agrees with the chunked backend (values and gradients).

Compiles four KeOps formulas (one product, three gradient reductions), all RBF in
float64 with two right-hand-side columns, about 6 s each on a cold cache.
"""

from __future__ import annotations

import sys

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels import KernelMatrix
from pnsolve.testing.tolerances import exact_tol

F64 = torch.float64


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def _assert_close(a, b, n):
    tol = exact_tol(F64, n) * max(1.0, float(b.detach().abs().max()))
    assert float((a - b).detach().abs().max()) <= tol


@pytest.mark.keops
def test_keops_matches_chunked_values_and_gradients():
    pytest.importorskip("pykeops.torch")
    results = {}
    for backend in ("chunked", "keops"):
        k = pn.kernels.RBF(
            lengthscale=torch.tensor([0.6, 1.1, 1.5], dtype=F64),
            outputscale=torch.tensor(1.3, dtype=F64),
        )
        X1 = _randn(40, 3).requires_grad_(True)
        X2 = _randn(30, 3, seed=1).requires_grad_(True)
        V = _randn(30, 2, seed=2).requires_grad_(True)
        W = _randn(40, 2, seed=3)
        op = KernelMatrix(k, X1, X2, backend=backend, tile=(16, 8))
        assert op.backend == backend
        out, rout = op @ V, op.rmatmat(W)
        (out**2).sum().backward()
        results[backend] = [
            out,
            rout,
            X1.grad,
            X2.grad,
            V.grad,
            k.raw_lengthscale.grad,
            k.raw_outputscale.grad,
        ]
    for a, b in zip(results["chunked"], results["keops"]):
        _assert_close(b, a, 40)


def test_missing_pykeops_gives_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pykeops.torch", None)
    k = pn.kernels.RBF()
    with pytest.raises(ImportError, match="keops"):
        KernelMatrix(k, torch.zeros(3, 2), backend="keops")
