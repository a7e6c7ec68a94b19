"""The kernel contract, for every family and typical sums and products.

Symmetric, positive semi-definite on random inputs, diagonal = rows, every backend's
products equal to the dense matrix (the chunked pass fuses a whole expression),
gradients equal to autograd through the dense matrix, float32 and float64, white noise
only on self pairs, and the algebra's identities as property tests.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.kernels.backends.tiling import dense_block, tiled_matmat
from pnsolve.testing import exact_tol
from pnsolve.testing.kernels import KEOPS_CASES, KERNEL_CASES, make_kernel_case

pytestmark = pytest.mark.usefixtures("one_thread")

F64, F32 = torch.float64, torch.float32
CASES = sorted(KERNEL_CASES)


def _inputs(n: int, d: int, dtype=F64, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, d, dtype=F64, generator=g).mul_(3.0).to(dtype)


def _close(a: torch.Tensor, b: torch.Tensor, n: int = 1, dtype: torch.dtype | None = None) -> None:
    tol = exact_tol(dtype or b.dtype, n) * max(1.0, float(b.abs().max()))
    err = float((a - b).abs().max())
    assert err <= tol, f"max error {err:.3e} > {tol:.3e}"


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", [F64, F32])
def test_symmetric_psd_and_diagonal(name, dtype):
    k, d = make_kernel_case(name)
    X = _inputs(60, d, dtype)
    with torch.no_grad():
        K = k(X)
        assert K.dtype == dtype and K.shape == (60, 60)
        assert torch.equal(K, K.mT)  # the in-place block mirrors its upper triangle
        lam = torch.linalg.eigvalsh(K.double())
        assert float(lam.min()) >= -exact_tol(dtype, 60) * float(lam.abs().max())
        _close(k.diag(X), K.diagonal(), 60)
        # the differentiable expression gives the same matrix
        _close(k._dense_graph(X, None, None), K, 60)


@pytest.mark.parametrize("name", CASES)
def test_float32_follows_float64(name):
    k, d = make_kernel_case(name)
    X = _inputs(40, d)
    with torch.no_grad():
        K64, K32 = k(X), k(X.float())
    assert K32.dtype == F32
    # float32 rounding of inputs and hyperparameters, amplified by the kernel's slope
    _close(K32.double(), K64, 40, dtype=F32)


@pytest.mark.parametrize("name", CASES)
def test_cross_covariance_and_paired_diagonal(name):
    k, d = make_kernel_case(name)
    X, Y = _inputs(31, d), _inputs(23, d, seed=1)
    with torch.no_grad():
        Kxy = k(X, Y)
        _close(Kxy, k._dense_graph(X, Y, None), 31)
        _close(k(Y, X), Kxy.mT, 31)
        op = k.linop(X, Y, backend="dense")
        _close(op.diagonal(), Kxy.diagonal(), 31)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("backend", ["dense", "chunked"])
def test_products_equal_the_dense_matrix(name, backend):
    k, d = make_kernel_case(name)
    X, Y = _inputs(45, d), _inputs(29, d, seed=1)
    g = torch.Generator().manual_seed(2)
    V, W = torch.randn(45, 3, dtype=F64, generator=g), torch.randn(29, 3, dtype=F64, generator=g)
    opts = {"tile": (8, 12)} if backend == "chunked" else {}  # the diagonal crosses tiles
    with torch.no_grad():
        K, Kxy = k(X), k(X, Y)
        _close(k.linop(X, backend=backend, **opts) @ V, K @ V, 45)
        op = k.linop(X, Y, backend=backend, **opts)
        _close(op @ W, Kxy @ W, 45)
        _close(op.T @ V, Kxy.mT @ V, 45)


@pytest.mark.keops
@pytest.mark.parametrize("name", KEOPS_CASES)
def test_keops_one_formula_equals_the_dense_matrix(name):
    k, d = make_kernel_case(name)
    X, Y = _inputs(40, d), _inputs(25, d, seed=1)
    V = torch.randn(40, 2, dtype=F64, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        _close(k.linop(X, backend="keops") @ V, k(X) @ V, 40)
        _close(k.linop(X, Y, backend="keops").T @ V, k(X, Y).mT @ V, 40)


@pytest.mark.keops
def test_keops_gradients_of_an_expression_equal_autograd():
    """One case only: KeOps compiles a gradient formula per parameter (about 6 s each)."""
    k, d = make_kernel_case("active-dims")
    X = _inputs(40, d)
    V = torch.randn(40, 2, dtype=F64, generator=torch.Generator().manual_seed(3))
    params = list(k.parameters())
    out = (k.linop(X, backend="keops") @ V).pow(2).sum()
    got = torch.autograd.grad(out, params)
    ref = torch.autograd.grad((k._dense_graph(X, None, None) @ V).pow(2).sum(), params)
    for a, b in zip(got, ref):
        _close(a, b, 40)


@pytest.mark.parametrize("name", CASES)
def test_chunked_gradients_equal_autograd_through_the_dense_matrix(name):
    k, d = make_kernel_case(name)
    X = _inputs(33, d).requires_grad_(True)
    V = torch.randn(33, 2, dtype=F64, generator=torch.Generator().manual_seed(4))
    V.requires_grad_(True)
    params = list(k.parameters())
    out = (k.linop(X, backend="chunked", tile=(7, 10)) @ V).pow(2).sum()
    inputs = [X, V, *params]
    got = torch.autograd.grad(out, inputs, allow_unused=True)
    ref_out = (k._dense_graph(X, None, None) @ V).pow(2).sum()
    ref = torch.autograd.grad(ref_out, inputs, allow_unused=True)
    for t, a, b in zip(inputs, got, ref):  # None: no dependence (white noise on X)
        zero = torch.zeros_like(t)
        _close(zero if a is None else a, zero if b is None else b, 33)


@pytest.mark.parametrize("name", CASES)
def test_bilinear_backward_equals_autograd(name):
    k, d = make_kernel_case(name)
    X = _inputs(26, d)
    g = torch.Generator().manual_seed(5)
    U, W = torch.randn(26, 2, dtype=F64, generator=g), torch.randn(26, 2, dtype=F64, generator=g)
    params = list(k.parameters())
    ref = torch.autograd.grad((U * (k._dense_graph(X, None, None) @ W)).sum(), params)
    k.zero_grad()
    k.bilinear_backward(X, U, W, rows=7)
    for p, r in zip(params, ref):
        assert p.grad is not None
        _close(p.grad, r, 26)


@pytest.mark.parametrize("name", ["mauna-loa", "nested", "white", "spectral-mixture"])
@pytest.mark.parametrize(("a", "b"), [(0, 37), (5, 19), (30, 37)])
def test_row_blocks_keep_the_self_pairs(name, a, b):
    """A row block of ``K(X, X)`` (a distributed rank's rows) keeps white noise and exact
    self values on its diagonal ``i + a``, in the tiled and the dense paths."""
    k, d = make_kernel_case(name)
    X = _inputs(37, d)
    V = torch.randn(37, 2, dtype=F64, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        K = k(X)
        _close(tiled_matmat(k, X[a:b], X, V, (4, 6), self_offset=a), K[a:b] @ V, 37)
        _close(tiled_matmat(k, X, X[a:b], V[a:b], (4, 6), self_offset=-a), K[:, a:b] @ V[a:b])
        _close(dense_block(k, X[a:b], X, self_offset=a), K[a:b], 37)
        _close(k._dense(X[a:b], X, self_index=torch.arange(a, b)), K[a:b], 37)


def test_white_noise_is_on_self_pairs_only():
    k = pn.kernels.RBF(0.5) + pn.kernels.White(0.25)
    X = _inputs(10, 2)
    with torch.no_grad():
        assert torch.allclose(k(X).diagonal(), torch.full((10,), 1.25, dtype=F64))
        # equal values in a second input set are other points: no noise
        assert torch.allclose(k(X, X.clone()).diagonal(), torch.ones(10, dtype=F64))
        assert torch.allclose(k.diag(X), torch.full((10,), 1.25, dtype=F64))
        assert torch.allclose(k.linop(X, X.clone()).diagonal(), torch.ones(10, dtype=F64))


def test_parameters_of_all_parts_are_one_module():
    a, b, c = pn.kernels.RBF(0.5), pn.kernels.Periodic(1.0, 2.0), pn.kernels.Linear(0.3)
    k = 2.0 * a + b * c
    assert {id(p) for p in k.parameters()} == {id(p) for m in (a, b, c) for p in m.parameters()}
    assert isinstance(k, pn.kernels.Sum) and len(k.parts) == 2
    # nested sums flatten; a repeated kernel shares its parameters
    s = a + b + c
    assert len(s.parts) == 3
    sq = a * a
    assert len(list(sq.parameters())) == 2
    X = _inputs(5, 2)
    with torch.no_grad():
        _close(sq(X), a(X) ** 2)


def test_constant_products_cost_no_tile_work():
    k = pn.kernels.Constant(3.0) * pn.kernels.RBF(0.5)
    assert k.tile_buffers == 0  # the constant enters the product's scale, not the tiles
    X = _inputs(20, 2)
    with torch.no_grad():
        _close(k(X), 3.0 * pn.kernels.RBF(0.5)(X))


@given(
    ls=st.floats(0.2, 3.0),
    period=st.floats(0.3, 4.0),
    c=st.floats(0.1, 5.0),
    var=st.floats(0.1, 3.0),
    seed=st.integers(0, 2**16),
)
def test_algebra_identities(ls, period, c, var, seed):
    """``(k1 + k2)(X) = k1(X) + k2(X)``, ``(k1 k2)(X) = k1(X) ⊙ k2(X)``, ``(c k)(X) = c k(X)``."""
    k1, k2 = pn.kernels.Matern(nu=1.5, lengthscale=ls), pn.kernels.Periodic(ls, period)
    k3 = pn.kernels.Linear(var)
    X = _inputs(17, 2, seed=seed)
    with torch.no_grad():
        A, B, C = k1(X), k2(X), k3(X)
        _close((k1 + k2)(X), A + B, 17)
        _close((k1 * k2 * k3)(X), A * B * C, 17)
        _close((c * k1)(X), c * A, 17)
        _close((k1 * c + k2 * k3)(X), c * A + B * C, 17)
        V = torch.randn(17, 1, dtype=F64, generator=torch.Generator().manual_seed(seed))
        op = (k1 * k2 + c * k3).linop(X, backend="chunked", tile=(5, 6))
        _close(op @ V, (A * B + c * C) @ V, 17)


def test_active_dims_select_columns():
    X = _inputs(12, 3)
    k = pn.kernels.RBF(torch.tensor([0.5, 0.9], dtype=F64), active_dims=[2, 0])
    ref = pn.kernels.RBF(torch.tensor([0.5, 0.9], dtype=F64))
    with torch.no_grad():
        _close(k(X), ref(X[:, [2, 0]]))
        p = pn.kernels.Periodic(1.0, 2.0, active_dims=[1])
        _close(p(X), pn.kernels.Periodic(1.0, 2.0)(X[:, 1:2]))
        s = pn.kernels.Linear(0.5, active_dims=(1, 2)) + pn.kernels.White(0.1)
        _close(s(X), pn.kernels.Linear(0.5)(X[:, 1:]) + 0.1 * torch.eye(12, dtype=F64))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: pn.kernels.RBF(active_dims=[]), "active_dims"),
        (lambda: pn.kernels.RBF(active_dims=[0, 0]), "repeat"),
        (lambda: pn.kernels.Linear(active_dims=[-1]), "active_dims"),
        (lambda: pn.kernels.RBF(torch.ones(3), active_dims=[0, 1]), "active_dims"),
        (lambda: pn.kernels.Periodic(torch.ones(2), torch.ones(3)), "equal sizes"),
        (lambda: pn.kernels.Polynomial(degree=0), "degree"),
        (lambda: pn.kernels.Constant(-1.0), "value"),
        (lambda: pn.kernels.White(float("nan")), "noise"),
        (lambda: 0.0 * pn.kernels.RBF(), "scale"),
        (lambda: pn.kernels.SpectralMixture(0), "num_mixtures"),
        (lambda: pn.kernels.SpectralMixture(2, means=torch.ones(3, 1)), "means"),
    ],
)
def test_bad_construction_is_refused_by_name(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_inputs_are_checked_against_every_part():
    k = pn.kernels.RBF(torch.ones(2)) + pn.kernels.Linear(active_dims=[4])
    with pytest.raises(ValueError, match="ARD"):
        k(torch.zeros(3, 5, dtype=F64))
    k2 = pn.kernels.RBF() + pn.kernels.Linear(active_dims=[4])
    with pytest.raises(ValueError, match="active_dims"):
        k2(torch.zeros(3, 2, dtype=F64))
    bad = pn.kernels.RBF(torch.ones(2)) * pn.kernels.Periodic(torch.ones(3), 1.0)
    with pytest.raises(ValueError, match="ARD"):
        bad(torch.zeros(3, 2, dtype=F64))
    with pytest.raises(TypeError):
        pn.kernels.RBF() + 1.0  # type: ignore[operator]
    with pytest.raises(TypeError, match="matrix-free"):
        pn.kernels.KernelMatrix(torch.nn.Linear(2, 2), torch.zeros(3, 2))  # type: ignore[arg-type]


def test_products_of_exp_kernels_are_one_gemm_and_one_exp():
    """``exp(a₁b₁ᵀ) exp(a₂b₂ᵀ) = exp([a₁ a₂][b₁ b₂]ᵀ)``: RBF × Periodic needs no scratch
    tile, and white noise in a sum touches only the self pairs."""
    k = pn.kernels.RBF(0.7) * pn.kernels.Periodic(1.1, 0.9) * pn.kernels.Constant(2.0)
    assert k.tile_buffers == 0 and k.tile_exp
    s = pn.kernels.RBF(0.7) + pn.kernels.White(0.3)
    assert s.tile_buffers == 0
    X = _inputs(30, 2)
    V = torch.randn(30, 2, dtype=F64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref = 2.0 * pn.kernels.RBF(0.7)(X) * pn.kernels.Periodic(1.1, 0.9)(X)
        _close(k.linop(X, backend="chunked", tile=(7, 9)) @ V, ref @ V, 30)
        ref_s = pn.kernels.RBF(0.7)(X) + 0.3 * torch.eye(30, dtype=F64)
        _close(s.linop(X, backend="chunked", tile=(7, 9)) @ V, ref_s @ V, 30)
