"""Row blocks of a symmetric kernel matrix (what each rank of the distributed backend owns).

``self_offset`` marks row ``i`` of the block as row ``i + offset`` of the full inputs:
the block must equal those rows of ``K(X, X)`` with exact-zero self distances, in the
tiled, dense and backward paths; ``vjp`` must equal autograd through the dense block.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels.backends import ChunkedBackend, DenseBackend
from pnsolve.kernels.backends.tiling import dense_block, tiled_matmat
from pnsolve.testing import exact_tol

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64


def _problem(n: int = 37, d: int = 3):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, d, dtype=F64, generator=g)
    V = torch.randn(n, 2, dtype=F64, generator=g)
    return X, V


KERNELS = {
    "rbf-ard": lambda: pn.kernels.RBF(lengthscale=torch.tensor([0.3, 0.6, 0.9])),
    "matern12": lambda: pn.kernels.Matern(nu=0.5, lengthscale=0.4),
    "matern32": lambda: pn.kernels.Matern(nu=1.5, lengthscale=0.4, outputscale=2.0),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize(("a", "b"), [(0, 37), (5, 19), (30, 37)])
def test_block_products_equal_the_rows_of_the_full_matrix(name, a, b):
    k = KERNELS[name]()
    X, V = _problem()
    with torch.no_grad():
        K = k(X)
        tol = exact_tol(F64, X.shape[0])
        # small tiles so that the diagonal crosses tile borders
        out = tiled_matmat(k, X[a:b], X, V, (4, 6), self_offset=a)
        torch.testing.assert_close(out, K[a:b] @ V, rtol=tol, atol=tol)
        # the transposed block K(X, X[a:b]) V[a:b]: offset −a
        back = tiled_matmat(k, X, X[a:b], V[a:b], (4, 6), self_offset=-a)
        torch.testing.assert_close(back, K[:, a:b] @ V[a:b], rtol=tol, atol=tol)
        block = dense_block(k, X[a:b], X, self_offset=a)
        torch.testing.assert_close(block, K[a:b], rtol=tol, atol=tol)
        diag = block.diagonal(a)  # self entries: exactly the outputscale
        assert torch.equal(diag, torch.full_like(diag, float(k.outputscale)))


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("backend", [ChunkedBackend, DenseBackend])
def test_block_vjp_equals_autograd_of_the_dense_block(name, backend):
    k = KERNELS[name]()
    X, V = _problem()
    a, b = 6, 23
    G = torch.randn(b - a, 2, dtype=F64, generator=torch.Generator().manual_seed(1))
    opts = {"tile": (4, 6)} if backend is ChunkedBackend else {}
    impl = backend(k, X[a:b], X, self_offset=a, **opts)
    g_rows, g_cols, g_params = impl.vjp(V, G, need_X1=True, need_X2=True)
    Xr, Xc = X[a:b].clone().requires_grad_(True), X.clone().requires_grad_(True)
    index = torch.arange(a, b)
    s = ((k._dense(Xr, Xc, self_index=index) @ V) * G).sum()
    ref = torch.autograd.grad(s, [Xr, Xc, *k.parameters()])
    tol = exact_tol(F64, X.shape[0])
    for got, want in zip([g_rows, g_cols, *g_params], ref):
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)
