"""KernelMatrix: dense and chunked backends agree with the dense kernel; autograd; memory bounds."""

from __future__ import annotations

import logging

import pytest
import torch

import pnsolve as pn
from pnsolve._core.errors import MissingStructureError
from pnsolve.kernels import KernelMatrix
from pnsolve.kernels.backends.auto import choose_backend
from pnsolve.linops import ScaledIdentity
from pnsolve.testing.contract import LinearOperatorContract
from pnsolve.testing.tolerances import exact_tol

F64 = torch.float64
TINY_TILE = (7, 11)  # far smaller than n: exercises row/column remainders and diagonal tiles


def _randn(*shape, dtype=F64, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _kernel(kind, d=3, dtype=F64, requires_grad=True):
    ls = torch.linspace(0.6, 1.4, d, dtype=dtype)
    os_ = torch.tensor(1.3, dtype=dtype)
    if kind == "rbf":
        k = pn.kernels.RBF(lengthscale=ls, outputscale=os_)
    else:
        k = pn.kernels.Matern(nu=kind, lengthscale=ls, outputscale=os_)
    return k.requires_grad_(requires_grad)


def _assert_close(a, b, n):
    tol = exact_tol(a.dtype, n) * max(1.0, float(b.detach().abs().max()))
    err = float((a - b).detach().abs().max())
    assert err <= tol, f"{err:.3e} > {tol:.3e}"


# --------------------------------------------------------------------- contracts
class TestKernelMatrixChunked(LinearOperatorContract):
    def make(self, dtype):
        X = _randn(23, 3, dtype=dtype)
        k = _kernel(1.5, dtype=dtype, requires_grad=False)
        return KernelMatrix(k, X, backend="chunked", tile=TINY_TILE), k(X)


class TestKernelMatrixChunkedRectangular(LinearOperatorContract):
    def make(self, dtype):
        X1, X2 = _randn(17, 2, dtype=dtype), _randn(12, 2, dtype=dtype, seed=1)
        k = _kernel("rbf", d=2, dtype=dtype, requires_grad=False)
        return KernelMatrix(k, X1, X2, backend="chunked", tile=TINY_TILE), k(X1, X2)


class TestKernelMatrixDense(LinearOperatorContract):
    def make(self, dtype):
        X = _randn(15, 3, dtype=dtype)
        k = _kernel(2.5, dtype=dtype, requires_grad=False)
        return KernelMatrix(k, X, backend="dense"), k(X)


class TestKernelPlusNoise(LinearOperatorContract):
    def make(self, dtype):
        X = _randn(19, 3, dtype=dtype)
        k = _kernel("rbf", dtype=dtype, requires_grad=False)
        op = KernelMatrix(k, X, backend="chunked", tile=TINY_TILE) + ScaledIdentity(
            19, 0.1, dtype=dtype
        )
        return op, k(X) + 0.1 * torch.eye(19, dtype=dtype)


# ----------------------------------------------------------------- agreement
@pytest.mark.parametrize("kind", ["rbf", 0.5, 1.5, 2.5])
@pytest.mark.parametrize("rect", [False, True])
def test_backends_agree_with_dense_kernel(kind, rect):
    k = _kernel(kind)
    X1 = _randn(40, 3)
    X2 = _randn(29, 3, seed=1) if rect else None
    K = k(X1, X2).detach()
    V = _randn(K.shape[1], 3, seed=2)
    W = _randn(K.shape[0], 2, seed=3)
    with torch.no_grad():
        for backend in ("dense", "chunked"):
            op = KernelMatrix(k, X1, X2, backend=backend, tile=TINY_TILE)
            _assert_close(op @ V, K @ V, K.shape[1])
            _assert_close(op @ V[:, 0], K @ V[:, 0], K.shape[1])
            _assert_close(op.rmatmat(W), K.mT @ W, K.shape[0])
            _assert_close(op.row_block([5, 0, 17]), K[[5, 0, 17]], 1)
            _assert_close(op.diagonal(), torch.diagonal(K), 1)


def test_symmetric_self_distances_are_exact():
    k = pn.kernels.Matern(0.5, lengthscale=torch.tensor(0.3, dtype=F64))
    X = _randn(30, 2) * 100  # large norms: the GEMM expansion would not cancel exactly
    op = KernelMatrix(k, X, backend="chunked", tile=TINY_TILE)
    with torch.no_grad():
        rows = op.row_block(torch.arange(30))
        assert torch.equal(torch.diagonal(rows), torch.full((30,), float(k.outputscale)))
        E = torch.eye(30, dtype=F64)
        assert torch.equal(torch.diagonal(op @ E), torch.diagonal(rows))


def test_chunked_never_forms_the_full_matrix():
    k = _kernel(1.5)
    X = _randn(300, 3)
    cap = 2 * 8 * 32 * 64  # two f64 buffers (Matérn needs scratch) of 32 × 64
    op = KernelMatrix(k, X, backend="chunked", max_memory=cap)
    tr, tc = op._impl.tile
    assert 2 * 8 * tr * tc <= cap
    V = _randn(300, 2, seed=1)
    with torch.no_grad():
        out = op @ V
    stats = op._impl.stats
    assert stats["buffer_elements"] <= tr * tc <= 32 * 64 < 300 * 300
    assert stats["tiles"] == -(-300 // tr) * -(-300 // tc)
    _assert_close(out, k(X).detach() @ V, 300)


def test_default_tile_fits_the_memory_cap():
    op = KernelMatrix(_kernel("rbf"), _randn(5000, 3), backend="chunked", max_memory=2**20)
    tr, tc = op._impl.tile
    assert tr * tc * 8 <= 2**20 and tr <= 5000 and tc <= 5000


# ------------------------------------------------------------------ autograd
@pytest.mark.parametrize("kind", ["rbf", 1.5])
def test_chunked_gradcheck_symmetric(kind):
    k = _kernel(kind, d=2).double()
    X = _randn(13, 2).requires_grad_(True)
    V = _randn(13, 2, seed=1).requires_grad_(True)
    params = tuple(k.parameters())

    def f(X, V, *p):
        return KernelMatrix(k, X, backend="chunked", tile=(4, 5)) @ V

    assert torch.autograd.gradcheck(f, (X, V, *params))


def test_chunked_gradcheck_rectangular_and_transposed():
    k = _kernel(2.5, d=2).double()
    X1 = _randn(9, 2).requires_grad_(True)
    X2 = _randn(11, 2, seed=1).requires_grad_(True)
    V = _randn(11, 2, seed=2).requires_grad_(True)
    W = _randn(9, 1, seed=3).requires_grad_(True)
    params = tuple(k.parameters())

    def f(X1, X2, V, W, *p):
        op = KernelMatrix(k, X1, X2, backend="chunked", tile=(4, 3))
        return op @ V, op.rmatmat(W)

    assert torch.autograd.gradcheck(f, (X1, X2, V, W, *params))


def test_gradients_agree_dense_vs_chunked():
    grads = {}
    for backend in ("dense", "chunked"):
        k = _kernel("rbf")
        X = _randn(50, 3).requires_grad_(True)
        V = _randn(50, 2, seed=1).requires_grad_(True)
        op = KernelMatrix(k, X, backend=backend, tile=TINY_TILE)
        loss = ((op @ V) ** 2).sum()
        loss.backward()
        grads[backend] = [X.grad, V.grad, k.raw_lengthscale.grad, k.raw_outputscale.grad]
    for a, b in zip(grads["dense"], grads["chunked"]):
        _assert_close(b, a, 50)


def test_dense_cache_follows_parameter_changes():
    k = _kernel("rbf")
    X = _randn(20, 3)
    op = KernelMatrix(k, X, backend="dense")
    v = _randn(20, seed=1)
    with torch.no_grad():
        y1 = op @ v
        k.lengthscale = torch.full((3,), 0.2, dtype=F64)
        y2 = op @ v
    _assert_close(y2, k(X).detach() @ v, 20)
    assert not torch.allclose(y1, y2)


# ---------------------------------------------------------------- composition
def test_add_diagonal_composes_rows_and_diagonal():
    k = _kernel(1.5)
    X = _randn(25, 3)
    op = KernelMatrix(k, X, backend="chunked", tile=TINY_TILE).add_diagonal(0.3)
    D = k(X).detach() + 0.3 * torch.eye(25, dtype=F64)
    with torch.no_grad():
        _assert_close(op.diagonal(), torch.diagonal(D), 1)
        _assert_close(op.row_block([3, 24]), D[[3, 24]], 1)
        _assert_close(op @ _randn(25, seed=4), D @ _randn(25, seed=4), 25)
    assert op.is_symmetric and op.is_psd


# ------------------------------------------------------------ auto and errors
def test_auto_rule_is_logged_and_exposed(caplog):
    k = _kernel("rbf")
    with caplog.at_level(logging.INFO, logger="pnsolve.linops"):
        small = KernelMatrix(k, _randn(100, 3))
        large = KernelMatrix(k, _randn(3000, 3))  # 3000² · 8 B = 69 MiB > 32 MiB
    free = choose_backend(3000, 3000, torch.float64, large.device)  # keops where it runs
    assert small.backend == "dense" and large.backend == free != "dense"
    assert "backend='dense'" in caplog.text and f"backend='{free}'" in caplog.text


def test_bad_arguments_are_named():
    k = _kernel("rbf")
    X = _randn(5, 3)
    with pytest.raises(TypeError, match="kernel"):
        KernelMatrix(lambda a, b: a, X)
    with pytest.raises(ValueError, match="backend"):
        KernelMatrix(k, X, backend="gpu")
    with pytest.raises(ValueError, match="max_memory"):
        KernelMatrix(k, X, max_memory=0)
    with pytest.raises(ValueError, match="tile"):
        KernelMatrix(k, X, tile=(0, 4))
    with pytest.raises(ValueError, match="X2"):
        KernelMatrix(k, X, _randn(4, 2))
    with pytest.raises(ValueError, match="square"):
        KernelMatrix(k, X, _randn(4, 3)).add_diagonal(0.1)


def test_rectangular_diagonal_is_structured_not_densified():
    k = _kernel("rbf")
    X1, X2 = _randn(6, 3), _randn(4, 3, seed=1)
    op = KernelMatrix(k, X1, X2, backend="chunked")
    with torch.no_grad():
        _assert_close(op.diagonal(), torch.diagonal(k(X1, X2)), 1)
    assert not isinstance(op, MissingStructureError)
