"""Kernels from GPyTorch: native mappings, the wrapper, dtypes, refusals, GPs.

Every comparison with GPyTorch is float64 to rounding: kernel matrices ``K(X)``,
``K(X, Y)``, ``diag(X)`` and paired values ``k(X_i, Y_i)`` against GPyTorch's own
``.to_dense()`` / ``diag=True`` within :func:`~pnsolve.testing.tolerances.exact_tol`
relative to the largest entry; the GP posterior within the forward error of a Cholesky
solve, :func:`~pnsolve.testing.tolerances.krylov_tol` at the system's condition number.
The GPyTorch kernels are cast to float64 *before* conversion, so that the copied values
are the ones GPyTorch computes with.
"""

from __future__ import annotations

import sys

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels.backends.keops import keops_available
from pnsolve.testing.tolerances import exact_tol, krylov_tol

gpytorch = pytest.importorskip("gpytorch")
G = gpytorch.kernels

pytestmark = pytest.mark.usefixtures("one_thread")

F64, F32 = torch.float64, torch.float32


def _data(n, d, seed, scale=1.0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(n, d, dtype=F64, generator=g)).to(dtype)


def _close(a, b, n=1, dtype=None):
    """``a`` equals ``b`` (the reference) to rounding, relative to ``b``'s largest entry."""
    a, b = a.detach(), b.detach()
    assert a.shape == b.shape, (a.shape, b.shape)
    tol = exact_tol(dtype or b.dtype, n) * max(1.0, float(b.abs().max()))
    err = float((a.to(b.dtype) - b).abs().max())
    assert err <= tol, f"max error {err:.3g} > {tol:.3g}"


def _dense(gk, X, Y=None):
    return gk(X, Y).to_dense()


def _learned(module):
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def _wrapped(k):
    return [m for m in k.modules() if isinstance(m, pn.kernels.GPyTorchKernel)]


def _assert_same_values(pk, gk, d, seed=0):
    """pnsolve ``pk`` and GPyTorch ``gk`` agree on K(X), K(X, Y), diag(X), k(X_i, Y_i)."""
    X, Y = _data(9, d, seed), _data(6, d, seed + 1)
    Z = _data(9, d, seed + 2)  # paired with X: k(X_i, Z_i)
    with torch.no_grad():
        _close(pk(X), _dense(gk, X), d)
        _close(pk(X, Y), _dense(gk, X, Y), d)
        _close(pk.diag(X), gk(X, diag=True), d)
        _close(pk._paired(X, Z), gk(X, Z, diag=True), d)
        _close(pk._paired(X, Z), _dense(gk, X, Z).diagonal(), d)


def _set(kernel, **values):
    """Cast a GPyTorch kernel to float64, set hyperparameters (their setters), return it."""
    kernel.double()
    for name, value in values.items():
        setattr(kernel, name, torch.as_tensor(value, dtype=F64))
    return kernel


def _sm(num_mixtures=3, ard=1, **kw):
    k = G.SpectralMixtureKernel(num_mixtures=num_mixtures, ard_num_dims=ard, **kw).double()
    g = torch.Generator().manual_seed(11)
    shape = (num_mixtures, 1, ard)
    return _set(
        k,
        mixture_weights=torch.rand(num_mixtures, dtype=F64, generator=g) + 0.2,
        mixture_means=torch.rand(shape, dtype=F64, generator=g) + 0.1,
        mixture_scales=0.3 * torch.rand(shape, dtype=F64, generator=g) + 0.05,
    )


def brief_expression():
    """ScaleKernel(RBF ARD) + ScaleKernel(Periodic) * Linear, with active_dims, on d = 4."""
    rbf = G.ScaleKernel(
        _set(G.RBFKernel(ard_num_dims=3, active_dims=[0, 1, 3]), lengthscale=[[0.6, 1.3, 0.9]])
    )
    per = G.ScaleKernel(_set(G.PeriodicKernel(active_dims=[2]), lengthscale=0.8, period_length=1.7))
    lin = _set(G.LinearKernel(active_dims=[0, 2]), variance=0.4)
    _set(rbf, outputscale=2.5)
    _set(per, outputscale=0.7)
    return (rbf + per * lin).double()


def nested_columns():
    """A ScaleKernel selecting columns [2, 0] around a sum whose parts select again."""
    inner = _set(G.RBFKernel(active_dims=[1]), lengthscale=0.7) + _set(
        G.LinearKernel(active_dims=[0]), variance=0.3
    )
    return _set(G.ScaleKernel(inner, active_dims=[2, 0]), outputscale=1.9).double()


# (name, GPyTorch kernel factory (float64), input dimension, native types of the result)
K = pn.kernels
CASES = [
    ("rbf", lambda: _set(G.RBFKernel(), lengthscale=0.7), 3, K.RBF),
    ("rbf-ard", lambda: _set(G.RBFKernel(ard_num_dims=3), lengthscale=[[0.5, 1.2, 2.0]]), 3,
     K.RBF),
    ("matern-0.5", lambda: _set(G.MaternKernel(nu=0.5), lengthscale=0.8), 2, K.Matern),
    ("matern-1.5", lambda: _set(G.MaternKernel(nu=1.5), lengthscale=0.8), 2, K.Matern),
    ("matern-2.5", lambda: _set(G.MaternKernel(nu=2.5), lengthscale=0.8), 2, K.Matern),
    ("matern-ard", lambda: _set(G.MaternKernel(nu=1.5, ard_num_dims=3),
                                lengthscale=[[0.6, 1.5, 0.9]]), 3, K.Matern),
    ("rq", lambda: _set(G.RQKernel(), lengthscale=0.9, alpha=0.4), 3, K.RationalQuadratic),
    ("rq-ard", lambda: _set(G.RQKernel(ard_num_dims=2), lengthscale=[[0.9, 1.6]], alpha=2.0), 2,
     K.RationalQuadratic),
    ("periodic", lambda: _set(G.PeriodicKernel(), lengthscale=1.1, period_length=2.3), 2,
     K.Periodic),
    ("periodic-ard", lambda: _set(G.PeriodicKernel(ard_num_dims=2), lengthscale=[[0.7, 1.4]],
                                  period_length=[[1.5, 3.1]]), 2, K.Periodic),
    ("linear", lambda: _set(G.LinearKernel(), variance=0.7), 3, K.Linear),
    ("linear-ard", lambda: _set(G.LinearKernel(ard_num_dims=3), variance=[[0.3, 1.1, 2.0]]), 3,
     K.Sum),
    ("polynomial", lambda: _set(G.PolynomialKernel(power=3), offset=0.5), 2, K.Polynomial),
    ("polynomial-float-power", lambda: _set(G.PolynomialKernel(power=2.0), offset=1.5), 2,
     K.Polynomial),
    ("cosine-one-column", lambda: _set(G.CosineKernel(active_dims=[1]), period_length=1.3), 2,
     K.Cosine),
    ("spectral-mixture", lambda: _sm(3), 1, K.SpectralMixture),
    ("constant", lambda: _set(G.ConstantKernel(), constant=torch.tensor([2.5])), 2, K.Constant),
    ("scale-rbf", lambda: _set(G.ScaleKernel(_set(G.RBFKernel(), lengthscale=0.5)),
                               outputscale=2.0), 2, K.RBF),
    ("scale-matern", lambda: _set(G.ScaleKernel(_set(G.MaternKernel(nu=2.5), lengthscale=1.2)),
                                  outputscale=3.0), 3, K.Matern),
    ("scale-rq", lambda: _set(G.ScaleKernel(_set(G.RQKernel(), lengthscale=1.3, alpha=2.0)),
                              outputscale=0.7), 2, K.RationalQuadratic),
    ("scale-periodic", lambda: _set(G.ScaleKernel(_set(G.PeriodicKernel(), lengthscale=0.8,
                                                       period_length=1.7)), outputscale=1.5), 1,
     K.Product),
    ("scale-linear", lambda: _set(G.ScaleKernel(_set(G.LinearKernel(), variance=0.3)),
                                  outputscale=1.7), 3, K.Product),
    ("scale-of-scale", lambda: _set(G.ScaleKernel(_set(G.ScaleKernel(G.RBFKernel()),
                                                       outputscale=3.0)), outputscale=2.0), 2,
     K.Product),
    ("sum", lambda: _set(G.RBFKernel(), lengthscale=0.6)
     + _set(G.MaternKernel(nu=0.5), lengthscale=1.1) * _set(G.RQKernel(), alpha=1.5), 3, K.Sum),
    ("additive-product-classes", lambda: G.ProductKernel(
        G.AdditiveKernel(G.RBFKernel(active_dims=[0]), G.LinearKernel(active_dims=[1])),
        _set(G.PeriodicKernel(), period_length=2.0)), 2, K.Product),
    ("scale-of-sum", lambda: G.ScaleKernel(G.RBFKernel() + G.LinearKernel()), 2, K.Product),
    ("brief-expression", brief_expression, 4, K.Sum),
    ("nested-columns", nested_columns, 3, K.Product),
]  # fmt: skip


@pytest.mark.parametrize("make, d, native", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mapped_kernels_equal_gpytorchs_matrices(make, d, native):
    gk = make().double()
    pk = pn.kernels.from_gpytorch(gk)
    assert type(pk) is native
    assert not _wrapped(pk)  # native all the way down: every backend applies
    _assert_same_values(pk, gk, d)
    # what GPyTorch learns is what the pnsolve kernel learns
    assert _learned(pk) == _learned(gk)


def test_mapped_structure_and_values():
    k = pn.kernels.from_gpytorch(brief_expression())
    rbf, prod = k.parts
    assert type(rbf) is K.RBF and rbf.active_dims == (0, 1, 3)
    assert rbf.outputscale.detach().item() == pytest.approx(2.5, rel=1e-14)
    assert rbf.lengthscale.detach().tolist() == pytest.approx([0.6, 1.3, 0.9], rel=1e-14)
    assert [type(p) for p in prod.parts] == [K.Constant, K.Periodic, K.Linear]
    const, per, lin = prod.parts
    assert const.value.detach().item() == pytest.approx(0.7, rel=1e-14)
    # GPyTorch divides sin² by λ, pnsolve by ℓ²
    assert per.lengthscale.detach().item() == pytest.approx(0.8**0.5, rel=1e-14)
    assert per.active_dims == (2,) and lin.active_dims == (0, 2)
    # a ScaleKernel's columns compose with those of the parts inside it
    nested = pn.kernels.from_gpytorch(nested_columns())
    const, total = nested.parts
    assert [p.active_dims for p in total.parts] == [(0,), (2,)]
    # ARD variances of a LinearKernel: one Linear per column
    lin = pn.kernels.from_gpytorch(G.LinearKernel(ard_num_dims=3))
    assert [p.active_dims for p in lin.parts] == [(0,), (1,), (2,)]
    # the cosine's period doubles (GPyTorch: cos(π r / p))
    cos = pn.kernels.from_gpytorch(_set(G.CosineKernel().double(), period_length=1.3), input_dim=1)
    assert type(cos) is K.Cosine
    assert cos.period.detach().item() == pytest.approx(2.6, rel=1e-14)


def test_learned_and_frozen_parameters():
    rbf = G.RBFKernel().double()
    bare = pn.kernels.from_gpytorch(rbf)
    assert bare.raw_lengthscale.requires_grad and not bare.raw_outputscale.requires_grad
    assert bare.outputscale.detach().item() == 1.0
    scaled = G.ScaleKernel(G.RBFKernel()).double()
    scaled.raw_outputscale.requires_grad_(False)
    scaled.base_kernel.raw_lengthscale.requires_grad_(False)
    k = pn.kernels.from_gpytorch(scaled)
    assert not k.raw_outputscale.requires_grad and not k.raw_lengthscale.requires_grad
    periodic = G.ScaleKernel(G.PeriodicKernel()).double()
    periodic.base_kernel.raw_period_length.requires_grad_(False)
    const, per = pn.kernels.from_gpytorch(periodic).parts
    assert const.raw_value.requires_grad and per.raw_lengthscale.requires_grad
    assert not per.raw_period.requires_grad
    sm = _sm(2)
    sm.raw_mixture_means.requires_grad_(False)
    k = pn.kernels.from_gpytorch(sm)
    assert not k.raw_means.requires_grad and k.raw_weights.requires_grad
    assert _learned(k) == _learned(sm) == 4


def test_values_are_copied_not_shared():
    gk = _set(G.RBFKernel().double(), lengthscale=0.5)
    k = pn.kernels.from_gpytorch(gk)
    assert k.raw_lengthscale.dtype == F64
    k.lengthscale = 2.0
    assert gk.lengthscale.item() == pytest.approx(0.5, rel=1e-14)
    gk.lengthscale = torch.tensor(3.0, dtype=F64)
    assert k.lengthscale.item() == pytest.approx(2.0, rel=1e-14)
    # a float32 GPyTorch kernel's values are copied exactly into float64 parameters
    g32 = _set(G.RBFKernel(), lengthscale=0.3)
    k32 = pn.kernels.from_gpytorch(g32)
    assert k32.raw_lengthscale.dtype == F64
    _close(k32.lengthscale.detach(), g32.lengthscale.detach().double().reshape(()))


def test_mapped_expression_products_on_the_chunked_backend():
    gk = brief_expression()
    k = pn.kernels.from_gpytorch(gk)
    X, Y = _data(37, 4, 3), _data(23, 4, 4)
    V = _data(37, 3, 5)
    W = _data(23, 3, 6)
    with torch.no_grad():
        KX, KXY = _dense(gk, X), _dense(gk, X, Y)
        _close(k.linop(X, backend="chunked", tile=(8, 12)) @ V, KX @ V, 37)
        op = k.linop(X, Y, backend="chunked", tile=(8, 12))
        _close(op @ W, KXY @ W, 37)
        _close(op.T @ V, KXY.mT @ V, 37)


@pytest.mark.keops
def test_mapped_expression_keops_product_equals_gpytorch():
    """The one KeOps test: the mapped expression is one formula (about 6 s to compile)."""
    gk = brief_expression()
    k = pn.kernels.from_gpytorch(gk)
    X, V = _data(40, 4, 7), _data(40, 2, 8)
    with torch.no_grad():
        _close(k.linop(X, backend="keops") @ V, _dense(gk, X) @ V, 40)


# ------------------------------------------------------------------------------ wrapper
class MyKernel(gpytorch.kernels.Kernel):
    """``exp(−a Σ_j |x_j − x'_j|)``: a product of Laplace kernels with a learned rate ``a``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.register_parameter("raw_rate", torch.nn.Parameter(torch.zeros(1)))
        self.register_constraint("raw_rate", gpytorch.constraints.Positive())

    @property
    def rate(self):
        return self.raw_rate_constraint.transform(self.raw_rate)

    def forward(self, x1, x2, diag=False, **params):
        if diag:
            l1 = (x1 - x2).abs().sum(-1)
        else:
            l1 = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs().sum(-1)
        return torch.exp(-self.rate * l1)


def my_kernel(rate=0.8, **kwargs):
    k = MyKernel(**kwargs).double()
    k.initialize(raw_rate=k.raw_rate_constraint.inverse_transform(torch.tensor([rate], dtype=F64)))
    return k


def test_a_custom_kernel_is_wrapped_and_equals_gpytorch():
    gk = my_kernel()
    k = pn.kernels.from_gpytorch(gk)
    assert type(k) is pn.kernels.GPyTorchKernel and k.gpytorch_kernel is gk
    assert k.matrix_free and repr(k) == "GPyTorchKernel(MyKernel)"
    _assert_same_values(k, gk, 3)
    # its parameters are the GPyTorch kernel's (shared, not copied)
    assert [id(p) for p in k.parameters()] == [id(p) for p in gk.parameters()]


@pytest.mark.parametrize("backend", ["dense", "chunked"])
def test_wrapper_products_equal_gpytorchs_matrix(backend):
    gk = my_kernel()
    k = pn.kernels.GPyTorchKernel(gk)
    X, Y = _data(45, 3, 1), _data(29, 3, 2)
    V, W = _data(45, 3, 3), _data(29, 3, 4)
    opts = {"tile": (8, 12)} if backend == "chunked" else {}  # the diagonal crosses tiles
    with torch.no_grad():
        KX, KXY = _dense(gk, X), _dense(gk, X, Y)
        _close(k.linop(X, backend=backend, **opts) @ V, KX @ V, 45)
        op = k.linop(X, Y, backend=backend, **opts)
        _close(op @ W, KXY @ W, 45)
        _close(op.T @ V, KXY.mT @ V, 45)
        _close(op.diagonal(), KXY.diagonal(), 45)
        _close(k.linop(X, backend=backend, **opts).diagonal(), KX.diagonal(), 45)


def test_wrapper_chunked_gradients_equal_autograd_through_gpytorch():
    gk = my_kernel()
    k = pn.kernels.from_gpytorch(gk)
    X = _data(33, 2, 5).requires_grad_(True)
    V = _data(33, 2, 6).requires_grad_(True)
    inputs = [X, V, *gk.parameters()]
    out = (k.linop(X, backend="chunked", tile=(7, 10)) @ V).pow(2).sum()
    got = torch.autograd.grad(out, inputs)
    ref = torch.autograd.grad((_dense(gk, X) @ V).pow(2).sum(), inputs)
    for a, b in zip(got, ref):
        _close(a, b, 33)
    # and the dense backend (the differentiable block through GPyTorch)
    out = (k.linop(X, backend="dense") @ V).pow(2).sum()
    for a, b in zip(torch.autograd.grad(out, inputs), ref):
        _close(a, b, 33)


def test_wrapper_bilinear_backward_equals_autograd():
    """The marginal-likelihood estimators' gradient: row blocks through GPyTorch."""
    gk = _set(G.ScaleKernel(my_kernel()), outputscale=1.4)
    k = pn.kernels.from_gpytorch(gk)
    X = _data(26, 2, 0)
    U, W = _data(26, 2, 1), _data(26, 2, 2)
    params = list(gk.parameters())
    ref = torch.autograd.grad((U * (_dense(gk, X) @ W)).sum(), params)
    k.zero_grad()
    k.bilinear_backward(X, U, W, rows=7)
    for p, r in zip(params, ref):
        assert p.grad is not None
        _close(p.grad, r, 26)


def test_an_optimiser_step_on_the_wrapper_trains_the_gpytorch_kernel():
    gk = my_kernel()
    k = pn.kernels.from_gpytorch(gk)
    before = gk.rate.item()
    opt = torch.optim.SGD(k.parameters(), lr=0.1)
    X = _data(10, 2, 0)
    k(X).sum().backward()
    opt.step()
    assert gk.rate.item() != before


def test_wrapped_parts_stay_in_native_sums_and_products():
    inner = _set(G.RBFKernel(active_dims=[0]), lengthscale=0.9) + my_kernel(active_dims=[1])
    gk = _set(G.ScaleKernel(inner, active_dims=[2, 0]), outputscale=1.3).double()
    gk = gk + _set(G.LinearKernel(), variance=0.2).double()
    k = pn.kernels.from_gpytorch(gk)
    scaled, lin = k.parts
    assert type(lin) is K.Linear
    const, total = scaled.parts
    rbf, wrapped = total.parts
    assert type(const) is K.Constant and type(rbf) is K.RBF and rbf.active_dims == (2,)
    assert type(wrapped) is pn.kernels.GPyTorchKernel and wrapped.active_dims == (2, 0)
    _assert_same_values(k, gk, 3)
    X, V = _data(30, 3, 9), _data(30, 2, 10)
    with torch.no_grad():  # one fused chunked pass over native and wrapped parts
        _close(k.linop(X, backend="chunked", tile=(7, 9)) @ V, _dense(gk, X) @ V, 30)


def test_a_scale_kernel_around_a_wrapped_kernel_is_wrapped_whole():
    gk = _set(G.ScaleKernel(my_kernel()), outputscale=2.0).double()
    k = pn.kernels.from_gpytorch(gk)
    assert type(k) is pn.kernels.GPyTorchKernel and k.gpytorch_kernel is gk
    _assert_same_values(k, gk, 2)


class _MyRBF(G.RBFKernel):
    pass


UNMAPPED = [
    # (name, factory, input dimension, positive inputs only)
    ("subclass", lambda: _set(_MyRBF(), lengthscale=0.7), 2, False),
    ("polynomial-fractional-power", lambda: _set(G.PolynomialKernel(power=2.5), offset=0.5), 2,
     True),
    ("polynomial-negative-offset", lambda: _set(
        G.PolynomialKernel(power=2, offset_constraint=gpytorch.constraints.Interval(-1.0, 1.0)),
        offset=-0.5), 2, False),
    ("cosine-several-columns", lambda: _set(G.CosineKernel(), period_length=1.7), 3, False),
    ("spectral-mixture-2d", lambda: _sm(2, ard=2), 2, False),
    ("scale-of-subclass", lambda: G.ScaleKernel(_MyRBF()), 2, False),
]  # fmt: skip


@pytest.mark.parametrize(
    "make, d, positive", [c[1:] for c in UNMAPPED], ids=[c[0] for c in UNMAPPED]
)
def test_kernels_without_an_exact_native_form_are_wrapped(make, d, positive):
    gk = make().double()
    k = pn.kernels.from_gpytorch(gk)
    assert type(k) is pn.kernels.GPyTorchKernel and k.gpytorch_kernel is gk
    X, Y = _data(9, d, 0), _data(6, d, 1)
    if positive:  # a fractional power of a negative xᵀx' + c is NaN in both
        X, Y = X.abs(), Y.abs()
    with torch.no_grad():
        _close(k(X), _dense(gk, X), d)
        _close(k(X, Y), _dense(gk, X, Y), d)
        _close(k.diag(X), gk(X, diag=True), d)


def test_gpytorch_spectral_mixture_multiplies_over_dimensions():
    """Why ``ard_num_dims > 1`` is wrapped: GPyTorch's is ``Π_j Σ_q``, pnsolve's ``Σ_q Π_j``."""
    gk = _sm(2, ard=2)
    native = pn.kernels.SpectralMixture(
        2,
        weights=gk.mixture_weights.detach(),
        means=gk.mixture_means.detach().reshape(2, 2),
        variances=gk.mixture_scales.detach().reshape(2, 2) ** 2,
    )
    X = _data(8, 2, 0)
    with torch.no_grad():
        assert float((native(X) - _dense(gk, X)).abs().max()) > 1e-2
        per_dim = [pn.kernels.from_gpytorch(_sm_column(gk, j))(X[:, j : j + 1]) for j in range(2)]
        _close(per_dim[0] * per_dim[1], _dense(gk, X), 2)


def _sm_column(gk, j):
    one = G.SpectralMixtureKernel(num_mixtures=gk.num_mixtures, ard_num_dims=1).double()
    return _set(
        one,
        mixture_weights=gk.mixture_weights.detach(),
        mixture_means=gk.mixture_means.detach()[..., j : j + 1],
        mixture_scales=gk.mixture_scales.detach()[..., j : j + 1],
    )


# -------------------------------------------------------------------------------- dtypes
def test_dtype_rule_of_the_wrapper():
    X64 = _data(12, 2, 0)
    X32 = X64.float()
    # float32 data, float64 kernel: computed in float64, rounded to float32
    k = pn.kernels.from_gpytorch(my_kernel())
    with torch.no_grad():
        K32 = k(X32)
        assert K32.dtype == F32
        _close(K32, _dense(k.gpytorch_kernel, X32.double()), 12, dtype=F32)
        assert (k.linop(X32, backend="chunked", tile=(5, 7)) @ X32[:, :1]).dtype == F32
    # float64 data, float32 kernel (GPyTorch's default): refused, saying to cast it
    k32 = pn.kernels.GPyTorchKernel(MyKernel())
    with pytest.raises(TypeError, match=r"X1 is torch\.float64.*float32 parameters.*double"):
        k32(X64)
    with pytest.raises(TypeError, match="float32 parameters"):
        k32.linop(X64, backend="chunked") @ X64[:, :1]
    # float32 data, float32 kernel: as it is
    with torch.no_grad():
        assert k32(X32).dtype == F32
    # casting the wrapper casts the GPyTorch kernel it shares
    k32.double()
    assert k32.gpytorch_kernel.raw_rate.dtype == F64
    with torch.no_grad():
        _close(k32(X64), _dense(k32.gpytorch_kernel, X64), 12)


class _Float32Output(MyKernel):
    def forward(self, x1, x2, diag=False, **params):
        return super().forward(x1, x2, diag=diag, **params).float()


def test_a_kernel_returning_lower_precision_is_refused():
    k = pn.kernels.GPyTorchKernel(_Float32Output().double())
    with pytest.raises(TypeError, match=r"returned torch\.float32 values for torch\.float64"):
        k(_data(5, 2, 0))


# ------------------------------------------------------------------------------------ GPs
def _dense_posterior(gk, X, y, Xs, noise):
    """The exact GP posterior (zero mean) with GPyTorch's matrices, by hand."""
    with torch.no_grad():
        Khat = _dense(gk, X) + noise * torch.eye(X.shape[0], dtype=F64)
        L = torch.linalg.cholesky(Khat)
        Ksx = _dense(gk, Xs, X)
        mean = Ksx @ torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
        W = torch.linalg.solve_triangular(L, Ksx.mT, upper=False)
        var = gk(Xs, diag=True) - (W * W).sum(0)
        return mean, var, float(torch.linalg.cond(Khat))


@pytest.mark.parametrize("which", ["wrapped", "mapped"])
def test_exact_gp_posterior_equals_a_dense_posterior_with_gpytorchs_matrix(which):
    n, t, d, noise = 40, 15, 2, 0.1
    g = torch.Generator().manual_seed(7)
    X = 6.0 * torch.rand(n, d, dtype=F64, generator=g) - 3.0
    y = torch.sin(2.0 * X).sum(1) + 0.1 * torch.randn(n, dtype=F64, generator=g)
    Xs = 7.0 * torch.rand(t, d, dtype=F64, generator=g) - 3.5
    if which == "wrapped":
        gk = _set(G.ScaleKernel(my_kernel(0.6)), outputscale=1.5).double()
    else:
        gk = G.ScaleKernel(_set(G.MaternKernel(nu=2.5, ard_num_dims=2), lengthscale=[[0.8, 1.4]]))
        gk = (gk + _set(G.LinearKernel(active_dims=[1]), variance=0.2)).double()
    k = pn.kernels.from_gpytorch(gk)
    assert bool(_wrapped(k)) == (which == "wrapped")
    post = pn.gp.ExactGP(k, noise=noise).fit(X, y).posterior(Xs)
    mean, var, cond = _dense_posterior(gk, X, y, Xs, noise)
    tol = krylov_tol(F64, cond)
    assert float((post.mean - mean).abs().max()) <= tol * float(y.abs().max())
    assert float((post.var - var).abs().max()) <= tol * float(gk(Xs, diag=True).detach().max())


def test_exact_gp_follows_a_change_of_the_wrapped_gpytorch_kernel():
    """The wrapped module is the model's kernel: changing it refits (never a stale answer)."""
    g = torch.Generator().manual_seed(3)
    X, Xs = torch.rand(20, 2, dtype=F64, generator=g), torch.rand(5, 2, dtype=F64, generator=g)
    y = torch.sin(3.0 * X).sum(1)
    gk = my_kernel(0.5)
    gp = pn.gp.ExactGP(pn.kernels.from_gpytorch(gk), noise=0.1).fit(X, y)
    first = gp.posterior(Xs).mean
    gk.initialize(raw_rate=gk.raw_rate_constraint.inverse_transform(torch.tensor([2.0], dtype=F64)))
    post = gp.posterior(Xs)
    mean, var, cond = _dense_posterior(gk, X, y, Xs, 0.1)
    assert float((post.mean - first).abs().max()) > 1e-3
    tol = krylov_tol(F64, cond)
    assert float((post.mean - mean).abs().max()) <= tol * float(y.abs().max())
    assert float((post.var - var).abs().max()) <= tol


# ------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: G.RBFKernel(batch_shape=torch.Size([2])), ValueError,
         r"RBFKernel with batch_shape=\(2,\)"),
        (lambda: G.ScaleKernel(G.MaternKernel(batch_shape=torch.Size([3]))) + G.LinearKernel(),
         ValueError, r"MaternKernel with batch_shape=\(3,\)"),
        (lambda: MyKernel(batch_shape=torch.Size([2])), ValueError, "MyKernel with batch_shape"),
        (lambda: G.ScaleKernel(G.AdditiveKernel(G.RBFKernel(active_dims=[3])), active_dims=[0, 1]),
         ValueError, r"RBFKernel has active_dims=\[3\].*2 columns"),
        (lambda: pn.kernels.RBF(), TypeError, "gpytorch.kernels.Kernel, got RBF"),
        (lambda: "RBFKernel", TypeError, "got str"),
    ],
)  # fmt: skip
def test_from_gpytorch_refusals_name_the_class(make, error, match):
    with pytest.raises(error, match=match):
        pn.kernels.from_gpytorch(make())


def test_wrapper_refusals():
    with pytest.raises(ValueError, match="RBFKernel with batch_shape"):
        pn.kernels.GPyTorchKernel(G.RBFKernel(batch_shape=torch.Size([2])))
    with pytest.raises(TypeError, match=r"wraps a gpytorch\.kernels\.Kernel, got RBF"):
        pn.kernels.GPyTorchKernel(pn.kernels.RBF())
    with pytest.raises(ValueError, match=r"active_dims=\[2\]"):
        pn.kernels.GPyTorchKernel(G.RBFKernel(active_dims=[2]), active_dims=[0, 1])
    with pytest.raises(ValueError, match="input_dim"):
        pn.kernels.from_gpytorch(G.CosineKernel(), input_dim=0)


def test_keops_is_refused_on_the_wrapper_with_a_pointer_to_chunked():
    k = pn.kernels.from_gpytorch(my_kernel())
    X = _data(6, 2, 0)
    match = r'backend="keops".*MyKernel.*backend="chunked" or backend="dense"'
    with pytest.raises(NotImplementedError, match=match):
        k.keops_formula(None, X, X, None)
    # a sum with a wrapped part: the sum's formula needs every part's
    with pytest.raises(NotImplementedError, match=match):
        (k + pn.kernels.RBF()).keops_formula(None, X, X, None)
    if keops_available():  # through KernelMatrix: refused before anything compiles
        for kernel in (k, pn.kernels.RBF() + k):
            with pytest.raises(NotImplementedError, match=match):
                kernel.linop(X, backend="keops") @ X[:, :1]


def test_missing_gpytorch_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gpytorch", None)
    with pytest.raises(ImportError, match="pip install gpytorch"):
        pn.kernels.from_gpytorch(object())
    with pytest.raises(ImportError, match="pip install gpytorch"):
        pn.kernels.GPyTorchKernel(object())
