"""SKI kernels: Keys weights, the grid matrix, refinement to the exact kernel, input checks."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.kernels.grid import Grid, keys_weights
from pnsolve.linops import Kronecker, Toeplitz
from pnsolve.testing import exact_tol

pytestmark = pytest.mark.usefixtures("one_thread")
F64 = torch.float64


def _rand(n, d, seed=0, lo=0.0, hi=1.0):
    g = torch.Generator().manual_seed(seed)
    return lo + (hi - lo) * torch.rand(n, d, generator=g, dtype=F64)


def _grid_points(grid: Grid) -> torch.Tensor:
    axes = [
        grid.lower[j] + grid.spacing[j] * torch.arange(s, dtype=F64)
        for j, s in enumerate(grid.sizes)
    ]
    return torch.cartesian_prod(*axes).reshape(-1, grid.dim)


# ------------------------------------------------------------------------ interpolation
def test_keys_kernel_values():
    """Keys' a = −1/2 kernel: 1 at 0, 0 at the other integers, partition of unity."""
    s = torch.tensor([0.0, 1.0, 2.0, -1.0, 2.5], dtype=F64)
    torch.testing.assert_close(keys_weights(s), torch.tensor([1.0, 0, 0, 0, 0], dtype=F64))
    f = torch.linspace(0, 1, 11, dtype=F64).unsqueeze(-1)
    total = keys_weights(f - torch.arange(-1, 3, dtype=F64)).sum(-1)
    torch.testing.assert_close(total, torch.ones(11, dtype=F64), rtol=0, atol=exact_tol(F64))


@settings(max_examples=30, deadline=None)
@given(
    d=st.integers(1, 3),
    sizes=st.lists(st.integers(4, 12), min_size=3, max_size=3),
    coeffs=st.lists(st.floats(-2, 2), min_size=10, max_size=10),
    seed=st.integers(0, 2**16),
)
def test_interpolation_exact_for_quadratics(d, sizes, coeffs, seed):
    """Keys' cubic convolution reproduces every polynomial of degree ≤ 2 on the interior.

    (Keys, 1981: the a = −1/2 kernel is third-order accurate; it is *not* exact for
    cubics — see the next test.)
    """
    grid = Grid.covering([(-1.0, 2.0)] * d, tuple(sizes[:d]))
    X = _rand(30, d, seed, -1.0, 2.0)
    X[0] = -1.0  # both ends of the interior
    X[1] = 2.0

    def f(Z):
        out = coeffs[0] + sum(coeffs[1 + j] * Z[:, j] for j in range(d))
        for j in range(d):
            for i in range(j, d):
                out = out + coeffs[4 + j + i] * Z[:, j] * Z[:, i]
        return out

    W = grid.interpolation(X)
    assert W.nnz_per_row == 4**d
    err = float((W @ f(_grid_points(grid)) - f(X)).abs().max())
    assert err <= exact_tol(F64, 100) * 100, err


def test_interpolation_error_for_cubics_is_third_order():
    """For x³ the error is O(h³): halving h divides it by ≈ 8 (unlike a Lagrange cubic).

    Keys' kernel is not exact for cubics."""
    X = _rand(200, 1, 1)
    errs = []
    for m in (13, 23, 43, 83):  # h = 1/10, 1/20, 1/40, 1/80
        grid = Grid.covering([(0.0, 1.0)], (m,))
        errs.append(
            float(
                (grid.interpolation(X) @ _grid_points(grid)[:, 0] ** 3 - X[:, 0] ** 3).abs().max()
            )
        )
    rates = [math.log2(a / b) for a, b in itertools.pairwise(errs)]
    assert errs[0] > 1e-5  # really not exact
    assert all(2.7 < r < 3.3 for r in rates), (errs, rates)


def test_outside_the_grid_is_refused_by_name():
    grid = Grid.covering([(0.0, 1.0), (0.0, 1.0)], (8, 8))
    X = torch.tensor([[0.5, 0.5], [0.2, 1.2]], dtype=F64)
    with pytest.raises(ValueError, match=r"Xs has a point outside the grid in dimension 1: row 1"):
        grid.interpolation(X, "Xs")


# --------------------------------------------------------------------------- the kernel
@pytest.mark.parametrize(
    "base",
    [
        pn.kernels.RBF(lengthscale=torch.tensor([0.3, 0.5])),
        pn.kernels.Matern(nu=1.5, lengthscale=torch.tensor([0.3, 0.5]), outputscale=2.0),
        pn.kernels.Matern(nu=2.5, lengthscale=0.4),
    ],
    ids=["rbf-ard", "matern32-ard", "matern52"],
)
def test_ski_kernel_pieces_agree(base):
    """Dense k(X1, X2), the operator, its transpose, rows and the diagonal agree (f64)."""
    k = pn.kernels.GridInterpolation(base, [20, 17], grid_bounds=[(0.0, 1.0), (0.0, 1.0)])
    X, Xs = _rand(40, 2), _rand(9, 2, seed=1)
    D = k(Xs, X).detach()
    op = k.linop(Xs, X)
    V = torch.randn(40, 3, generator=torch.Generator().manual_seed(2), dtype=F64)
    tol = exact_tol(F64, 20 * 17) * float(D.abs().max())
    torch.testing.assert_close(op @ V, D @ V, rtol=0, atol=tol * 10)
    torch.testing.assert_close(
        op.rmatmat(torch.ones(9, 2, dtype=F64)),
        D.mT @ torch.ones(9, 2, dtype=F64),
        rtol=0,
        atol=tol * 10,
    )
    torch.testing.assert_close(op.row_block([3, 0]), D[[3, 0]], rtol=0, atol=tol)
    torch.testing.assert_close(op.diagonal(), D.diagonal(), rtol=0, atol=tol)
    K = k.linop(X)
    assert K.is_symmetric and K.is_psd
    torch.testing.assert_close(k.diag(X), k(X).diagonal(), rtol=0, atol=tol)
    torch.testing.assert_close(K.diagonal(), k.diag(X), rtol=0, atol=tol)


def test_grid_matrix_structure_and_values():
    """K_UU = k(U, U): Kronecker of Toeplitz for the RBF, multilevel Toeplitz for Matérn."""
    bounds = [(0.0, 1.0), (-1.0, 1.0)]
    for base, kind in [
        (pn.kernels.RBF(lengthscale=torch.tensor([0.2, 0.7]), outputscale=1.5), Kronecker),
        (pn.kernels.Matern(nu=0.5, lengthscale=torch.tensor([0.2, 0.7])), Toeplitz),
    ]:
        k = pn.kernels.GridInterpolation(base, [9, 6], grid_bounds=bounds)
        grid = k.grid(_rand(3, 2))
        K = k.grid_matrix(grid, F64, "cpu")
        assert isinstance(K, kind) and K.is_psd
        U = _grid_points(grid)
        ref = base(U).detach()
        # asked for on the CPU: compare there
        torch.testing.assert_close(K.to_dense(), ref.cpu(), rtol=0, atol=exact_tol(F64, 54))


@pytest.mark.parametrize("d", [1, 2])
def test_ski_converges_to_the_exact_kernel_as_the_grid_refines(d):
    """max |k_SKI − k| falls with the grid spacing (≈ h³ for the smooth RBF)."""
    base = pn.kernels.RBF(lengthscale=0.25)
    X = _rand(60, d, 3)
    exact = base(X).detach()
    errs = []
    for m in (10, 20, 40, 80):
        k = pn.kernels.GridInterpolation(base, m, grid_bounds=[(0.0, 1.0)] * d)
        errs.append(float((k(X).detach() - exact).abs().max()))
    assert all(b < a / 4 for a, b in itertools.pairwise(errs)), errs
    assert errs[-1] < 1e-4


def test_data_bounds_and_bind():
    """Without bounds the grid covers the inputs with a 5 % margin; bind fixes it to X."""
    base = pn.kernels.RBF(lengthscale=0.3)
    k = pn.kernels.GridInterpolation(base, 16)
    X = _rand(30, 2, 4, -2.0, 3.0)
    grid = k.grid(X)
    lo, hi = X.amin(0), X.amax(0)
    for j in range(2):
        a, b = grid.interior(j)
        span = float(hi[j] - lo[j])
        assert a == pytest.approx(float(lo[j]) - 0.05 * span)
        assert b == pytest.approx(float(hi[j]) + 0.05 * span)
    bound = k.bind(X)
    assert bound is not k and bound.base_kernel is base and k.grid_bounds is None
    assert bound.bind(X) is bound
    torch.testing.assert_close(bound(X), k(X))
    with pytest.raises(ValueError, match="outside the grid"):
        bound.linop(X + 10.0)


def test_gradients_reach_the_base_kernel_through_the_grid():
    """bilinear_backward (through K_UU) = autograd of Σ_c u_cᵀ W K_UU Wᵀ w_c on the dense kernel."""
    X = _rand(50, 2, 5)
    g = torch.Generator().manual_seed(6)
    U, W = torch.randn(50, 3, generator=g, dtype=F64), torch.randn(50, 3, generator=g, dtype=F64)
    for base in (
        pn.kernels.RBF(lengthscale=torch.tensor([0.3, 0.4])),
        pn.kernels.Matern(nu=1.5, lengthscale=0.3),
    ):
        k = pn.kernels.GridInterpolation(base, 15, grid_bounds=[(0.0, 1.0)] * 2)
        k.bilinear_backward(X, U, W, rows=7)
        got = [p.grad.clone() for p in base.parameters()]
        base.zero_grad()
        (U * (k(X) @ W)).sum().backward()
        for a, p in zip(got, base.parameters(), strict=True):
            torch.testing.assert_close(a, p.grad, rtol=1e-10, atol=1e-12)
        base.zero_grad()


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        ((pn.kernels.RBF(), 3), {}, ValueError, "at least 4"),
        ((pn.kernels.RBF(), [10, 2]), {}, ValueError, "at least 4"),
        ((pn.kernels.RBF(), 10.0), {}, TypeError, "grid_size"),
        (("rbf", 10), {}, TypeError, "stationary"),
        ((pn.kernels.RBF(), 10), {"grid_bounds": [(1.0, 0.0)]}, ValueError, "lo < hi"),
        ((pn.kernels.RBF(), 10), {"grid_bounds": [(0.0, float("inf"))]}, ValueError, "finite"),
        ((pn.kernels.RBF(), 10), {"grid_bounds": [1.0]}, ValueError, "pairs"),
        ((pn.kernels.RBF(), [10, 10]), {"grid_bounds": [(0.0, 1.0)]}, ValueError, "disagree"),
        (
            (pn.kernels.RBF(lengthscale=torch.ones(3)), 10),
            {"grid_bounds": [(0, 1)]},
            ValueError,
            "disagree",
        ),
        ((pn.kernels.RBF(), 4), {"grid_bounds": [(0.0, 1.0)] * 6}, ValueError, "at most 5"),
        ((pn.kernels.RBF(), 400), {"grid_bounds": [(0.0, 1.0)] * 3}, ValueError, "smaller"),
    ],
)
def test_bad_configuration_is_refused(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        pn.kernels.GridInterpolation(*args, **kwargs)


def test_nested_grid_kernel_is_refused():
    inner = pn.kernels.GridInterpolation(pn.kernels.RBF(), 10)
    with pytest.raises(TypeError, match="stationary"):
        pn.kernels.GridInterpolation(inner, 10)


def test_bad_inputs_are_refused():
    k = pn.kernels.GridInterpolation(pn.kernels.RBF(), 10, grid_bounds=[(0.0, 1.0)] * 2)
    with pytest.raises(ValueError, match="input dimensions"):
        k.linop(_rand(5, 3))
    with pytest.raises(ValueError, match=r"NaN|finite"):
        k(torch.tensor([[0.5, float("nan")]], dtype=F64))
    with pytest.raises(ValueError, match="backend"):
        k.linop(_rand(5, 2), backend="gpu")
    with pytest.raises(ValueError, match="not supported for GridInterpolation"):
        k.linop(_rand(5, 2), backend="distributed")
    with pytest.raises(TypeError, match="options"):
        k.linop(_rand(5, 2), tile=(4, 4))
    free = pn.kernels.GridInterpolation(pn.kernels.RBF(), 4)
    with pytest.raises(ValueError, match="at most 5"):
        free(_rand(5, 6))


def test_float32_follows_inputs():
    k = pn.kernels.GridInterpolation(pn.kernels.RBF(lengthscale=0.3), 30, grid_bounds=[(0, 1)])
    X = _rand(20, 1).float()
    K = k.linop(X)
    assert K.dtype == torch.float32 and k(X).dtype == torch.float32
    assert (K @ torch.ones(20)).dtype == torch.float32
    torch.testing.assert_close(k(X).double(), k(X.double()).detach(), rtol=0, atol=1e-5)


def test_dense_evaluation_in_column_blocks(monkeypatch):
    """to_dense in several column blocks (either orientation) = one block."""
    import pnsolve.kernels.ski_matrix as ski_matrix

    k = pn.kernels.GridInterpolation(
        pn.kernels.Matern(nu=1.5, lengthscale=0.3), 12, grid_bounds=[(0.0, 1.0)] * 2
    )
    X, Xs = _rand(25, 2, 7), _rand(6, 2, 8)
    full = [k.linop(Xs, X).to_dense(), k.linop(X, Xs).to_dense(), k.linop(X).to_dense()]
    monkeypatch.setattr(ski_matrix, "DENSE_BLOCK_BYTES", 144 * 4 * 16 * 2)  # two columns
    blocks = [k.linop(Xs, X).to_dense(), k.linop(X, Xs).to_dense(), k.linop(X).to_dense()]
    for a, b in zip(full, blocks, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=exact_tol(F64, 144))
    torch.testing.assert_close(full[0], full[1].mT, rtol=0, atol=exact_tol(F64, 144))


@pytest.mark.parametrize(
    "make",
    [
        lambda: (
            pn.kernels.RBF(0.7)
            + pn.kernels.Matern(nu=2.5, lengthscale=1.3) * pn.kernels.Periodic(1.0, 2.0)
        ),
        lambda: pn.kernels.SpectralMixture(2) + pn.kernels.Constant(0.3),
    ],
    ids=["sum-of-products", "spectral-mixture"],
)
def test_stationary_expressions_on_the_grid_converge_like_cubic_interpolation(make):
    """A stationary expression's grid matrix is its values at the grid's lags (Toeplitz):
    the SKI error falls like h⁴ (cubic convolution), about 16× per halving of h."""
    base = make()
    X = torch.linspace(0, 10, 200, dtype=torch.float64).unsqueeze(-1)
    with torch.no_grad():
        K = base(X)
        errors = [
            float((pn.kernels.GridInterpolation(base, grid_size=m)(X) - K).abs().max())
            for m in (100, 200)
        ]
    assert errors[1] < errors[0] / 8
    assert errors[1] < 1e-3 * float(K.abs().max())


@pytest.mark.parametrize(
    ("base", "error"),
    [
        (lambda: pn.kernels.RBF() + pn.kernels.White(0.1), TypeError),
        (lambda: pn.kernels.Linear(), TypeError),
        (lambda: pn.kernels.RBF(active_dims=[0]), ValueError),
    ],
    ids=["white", "linear", "active-dims"],
)
def test_non_stationary_or_column_restricted_bases_are_refused_by_name(base, error):
    with pytest.raises(error, match="base"):
        pn.kernels.GridInterpolation(base(), grid_size=10)
