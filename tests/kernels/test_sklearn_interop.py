"""Kernels to and from scikit-learn: values, learned parameters, round trips, refusals, GPs.

Every comparison with scikit-learn is float64 to rounding: kernel matrices ``K(X)``,
``K(X, Y)``, ``K(X, X)`` (distinct point sets: a white-noise term gives zeros) and
``diag(X)`` within :func:`~pnsolve.testing.tolerances.exact_tol` relative to the largest
entry; the GP posterior and log marginal likelihood within the forward error of a
Cholesky solve, :func:`~pnsolve.testing.tolerances.krylov_tol` at the system's condition
number.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch

import pnsolve as pn
from pnsolve.testing.tolerances import exact_tol, krylov_tol

skk = pytest.importorskip("sklearn.gaussian_process.kernels")
from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: E402

F64 = torch.float64


def _data(n, d, seed, scale=1.0):
    return scale * np.random.default_rng(seed).standard_normal((n, d))


def _t(a):
    return torch.as_tensor(a, dtype=F64)


def _np(t):
    return t.detach().cpu().numpy()


def _assert_close(a, b, n=1):
    """``a`` (pnsolve, a tensor or array) equals ``b`` (scikit-learn) to rounding."""
    a = _np(a) if isinstance(a, torch.Tensor) else np.asarray(a)
    b = np.asarray(b)
    assert a.shape == b.shape
    tol = exact_tol(F64, n) * max(1.0, float(np.abs(b).max()))
    err = float(np.abs(a - b).max())
    assert err <= tol, f"max error {err:.3g} > {tol:.3g}"


def _learned(k):
    return sum(p.numel() for p in k.parameters() if p.requires_grad)


def _coincident_tol(pk, X, d):
    """Tolerance on ``k(X, X)`` with ``X`` passed twice (distinct sets, coincident points).

    pnsolve forms squared distances as ``‖a‖² + ‖b‖² − 2 a·b`` (one GEMM): at coincident
    points of two input sets they are rounding-level, not zero, and a Matérn ν = 1/2
    (``exp(−r)``, slope −1 at ``r = 0``) turns them into errors of ``√(eps) ‖x‖ / ℓ``.
    Other kernels are flat at ``r = 0`` and stay at rounding.
    """
    rough = [m for m in pk.modules() if isinstance(m, pn.kernels.Matern) and m.nu == 0.5]
    if not rough:
        return None
    z = max(float(np.linalg.norm(X, axis=1).max() / m.lengthscale.min()) for m in rough)
    return math.sqrt(exact_tol(F64, d)) * z


def _assert_same_values(pk, sk, d, seed=0):
    """pnsolve ``pk`` and scikit-learn ``sk`` agree on K(X), K(X, Y), K(X, X), diag(X)."""
    X, Y = _data(9, d, seed), _data(6, d, seed + 1)
    with torch.no_grad():
        _assert_close(pk(_t(X)), sk(X), d)
        _assert_close(pk(_t(X), _t(Y)), sk(X, Y), d)
        _assert_close(pk.diag(_t(X)), sk.diag(X), d)
        # X as a second, distinct input set: white noise gives zeros, as in scikit-learn
        tol = _coincident_tol(pk, X, d)
        if tol is None:
            _assert_close(pk(_t(X), _t(X)), sk(X, X), d)
        else:
            assert float(np.abs(_np(pk(_t(X), _t(X))) - sk(X, X)).max()) <= tol


def mauna_loa():
    return (
        50.0**2 * skk.RBF(50.0)
        + 2.0**2 * skk.RBF(100.0) * skk.ExpSineSquared(1.0, 1.0)
        + 0.5**2 * skk.RationalQuadratic(1.0, 1.0)
        + 0.1**2 * skk.RBF(0.1)
        + skk.WhiteKernel(0.01)
    )


# (name, scikit-learn kernel factory, input dimension): every supported class and form
CASES = [
    ("rbf", lambda: skk.RBF(0.7), 3),
    ("rbf-ard", lambda: skk.RBF([0.5, 1.2, 2.0]), 3),
    ("rbf-one-element-array", lambda: skk.RBF([0.8]), 2),
    ("matern-0.5", lambda: skk.Matern(0.8, nu=0.5), 2),
    ("matern-1.5", lambda: skk.Matern(0.8, nu=1.5), 2),
    ("matern-2.5", lambda: skk.Matern(0.8, nu=2.5), 2),
    ("matern-ard", lambda: skk.Matern([0.6, 1.5, 0.9], nu=1.5), 3),
    ("matern-inf", lambda: skk.Matern(0.9, nu=np.inf), 2),
    ("rq", lambda: skk.RationalQuadratic(0.9, 0.4), 3),
    ("exp-sine-squared", lambda: skk.ExpSineSquared(1.1, 2.3), 1),
    ("dot-product", lambda: skk.DotProduct(0.7), 3),
    ("dot-product-zero-fixed", lambda: skk.DotProduct(0.0, sigma_0_bounds="fixed"), 3),
    ("polynomial", lambda: skk.DotProduct(0.5) ** 3, 2),
    ("polynomial-float-exponent", lambda: skk.DotProduct(1.5) ** 2.0, 2),
    ("constant", lambda: skk.ConstantKernel(2.5), 2),
    ("white", lambda: skk.WhiteKernel(0.3), 2),
    ("constant-times-rbf", lambda: 2.0 * skk.RBF(0.5), 2),
    ("rbf-times-constant", lambda: skk.RBF(0.5) * 2.0, 2),
    ("constant-times-matern", lambda: skk.ConstantKernel(3.0) * skk.Matern(1.2, nu=2.5), 3),
    ("constant-times-rq", lambda: 0.7 * skk.RationalQuadratic(1.3, 2.0), 2),
    (
        "constant-times-linear",
        lambda: 1.7 * skk.DotProduct(0.0, sigma_0_bounds="fixed"),
        3,
    ),
    ("constant-times-periodic", lambda: 1.5 * skk.ExpSineSquared(0.8, 1.7), 1),
    ("constant-times-white", lambda: 1.5 * skk.WhiteKernel(0.2), 2),
    ("two-constants", lambda: 2.0 * (3.0 * skk.RBF(0.9)), 2),
    ("constant-times-two-rbf", lambda: skk.RBF(0.9) * 2.0 * skk.RBF(1.4), 2),
    ("sum", lambda: skk.RBF(0.6) + skk.Matern(1.1, nu=0.5) * skk.RationalQuadratic(0.8, 1.5), 3),
    ("power", lambda: skk.RBF(0.7) ** 3, 2),
    ("power-of-scaled", lambda: (2.0 * skk.RBF(0.7)) ** 2, 2),
    ("constant-times-power", lambda: 2.0 * skk.RBF(0.7) ** 2, 2),
    ("power-of-sum", lambda: (skk.RBF(0.7) + skk.WhiteKernel(0.1)) ** 2, 2),
    ("power-one", lambda: skk.Matern(0.7, nu=1.5) ** 1, 2),
    ("dot-product-plus-rbf", lambda: skk.DotProduct(0.3) + 0.5 * skk.RBF(1.0), 3),
    ("periodic-times-rbf", lambda: skk.ExpSineSquared(0.9, 1.3) * skk.RBF(2.0), 1),
    ("mauna-loa", mauna_loa, 1),
]


@pytest.mark.parametrize("make, d", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_values_and_learned_parameters_equal_scikit_learns(make, d):
    sk = make()
    pk = pn.kernels.from_sklearn(sk)
    assert isinstance(pk, pn.kernels.Kernel)
    _assert_same_values(pk, sk, d)
    # what scikit-learn learns (its theta) is what the pnsolve kernel learns
    assert _learned(pk) == len(sk.theta)


def test_constants_fold_into_the_stationary_outputscale():
    for sk in (2.0 * skk.RBF(0.5), skk.RBF(0.5) * 2.0):
        k = pn.kernels.from_sklearn(sk)
        assert type(k) is pn.kernels.RBF
        assert float(k.outputscale.detach()) == pytest.approx(2.0, rel=1e-15)
        assert k.raw_outputscale.requires_grad and k.raw_lengthscale.requires_grad
    bare = pn.kernels.from_sklearn(skk.RBF(0.5))
    assert float(bare.outputscale.detach()) == 1.0 and not bare.raw_outputscale.requires_grad
    # one constant per stationary kernel: the second stays a Constant factor
    k = pn.kernels.from_sklearn(2.0 * (3.0 * skk.RBF(0.9)))
    assert isinstance(k, pn.kernels.Product)
    assert [type(p) for p in k.parts] == [pn.kernels.Constant, pn.kernels.RBF]
    # a constant folds into a plain dot product's variance
    lin = pn.kernels.from_sklearn(1.7 * skk.DotProduct(0.0, sigma_0_bounds="fixed"))
    assert type(lin) is pn.kernels.Linear and lin.raw_variance.requires_grad
    # never into a kernel that a power repeats (that would raise the constant to the power)
    k = pn.kernels.from_sklearn(2.0 * skk.RBF(0.7) ** 2)
    assert [type(p) for p in k.parts] == [pn.kernels.Constant, pn.kernels.RBF, pn.kernels.RBF]


def test_a_constant_first_in_a_sum():
    sk = skk.ConstantKernel(0.5) + skk.RBF(0.8)
    _assert_same_values(pn.kernels.from_sklearn(sk), sk, 2)


def test_mauna_loa_structure():
    k = pn.kernels.from_sklearn(mauna_loa())
    assert isinstance(k, pn.kernels.Sum)
    types = [type(p) for p in k.parts]
    assert types == [
        pn.kernels.RBF,
        pn.kernels.Product,
        pn.kernels.RationalQuadratic,
        pn.kernels.RBF,
        pn.kernels.White,
    ]
    assert [
        float(p.outputscale.detach()) for p in (k.parts[0], k.parts[2], k.parts[3])
    ] == pytest.approx([2500.0, 0.25, 0.01], rel=1e-15)
    assert _learned(k) == len(mauna_loa().theta) == 12


def test_fixed_bounds_become_frozen_parameters():
    sk = (
        skk.ConstantKernel(2.0, constant_value_bounds="fixed")
        * skk.RBF([0.5], length_scale_bounds="fixed")
        + skk.RationalQuadratic(1.0, 2.0, alpha_bounds="fixed")
        + skk.ExpSineSquared(1.0, 3.0, periodicity_bounds="fixed")
        + skk.WhiteKernel(0.1, noise_level_bounds="fixed")
        + skk.DotProduct(0.5, sigma_0_bounds="fixed") ** 2
    )
    k = pn.kernels.from_sklearn(sk)
    rbf, rq, per, white, poly = k.parts
    assert not rbf.raw_outputscale.requires_grad and not rbf.raw_lengthscale.requires_grad
    assert rq.raw_lengthscale.requires_grad and not rq.raw_alpha.requires_grad
    assert per.raw_lengthscale.requires_grad and not per.raw_period.requires_grad
    assert not white.raw_noise.requires_grad
    assert type(poly) is pn.kernels.Polynomial and not poly.raw_offset.requires_grad
    assert _learned(k) == len(sk.theta) == 2
    _assert_same_values(k, sk, 1)


def test_powers_share_one_kernel():
    k = pn.kernels.from_sklearn(skk.RBF(0.7) ** 3)
    assert isinstance(k, pn.kernels.Product) and len(k.parts) == 3
    assert k.parts[0] is k.parts[1] is k.parts[2]
    assert len(list(k.parameters())) == 2  # listed once: lengthscale and outputscale
    poly = pn.kernels.from_sklearn(skk.DotProduct(0.5) ** 3)
    assert type(poly) is pn.kernels.Polynomial
    assert poly.degree == 3 and float(poly.offset.detach()) == pytest.approx(0.25, rel=1e-15)
    dot = pn.kernels.from_sklearn(skk.DotProduct(0.5))
    assert [type(p) for p in dot.parts] == [pn.kernels.Linear, pn.kernels.Constant]
    assert not dot.parts[0].raw_variance.requires_grad and dot.parts[1].raw_value.requires_grad


def test_the_periodic_caveat_for_several_input_dimensions():
    # scikit-learn's sine of the Euclidean distance differs from pnsolve's sum over columns
    sk = skk.ExpSineSquared(1.0, 2.0)
    pk = pn.kernels.from_sklearn(sk)
    X = _data(8, 2, 0)
    with torch.no_grad():
        assert float(np.abs(_np(pk(_t(X))) - sk(X)).max()) > 1e-3
    assert isinstance(pn.kernels.from_sklearn(sk, input_dim=1), pn.kernels.Periodic)
    with pytest.raises(ValueError, match=r"ExpSineSquared.*input_dim=2.*Euclidean"):
        pn.kernels.from_sklearn(skk.RBF() + 2.0 * sk, input_dim=2)
    assert isinstance(pn.kernels.from_sklearn(skk.RBF(), input_dim=3), pn.kernels.RBF)
    with pytest.raises(ValueError, match="input_dim"):
        pn.kernels.from_sklearn(sk, input_dim=0)


# --------------------------------------------------------------------------- round trips
def _pnsolve_kernels():
    K = pn.kernels
    ard = torch.tensor([0.5, 1.1, 1.6], dtype=F64)
    return [
        ("rbf", K.RBF(lengthscale=0.6), 3),
        ("rbf-scaled", K.RBF(lengthscale=0.6, outputscale=2.5), 3),
        ("rbf-ard", K.RBF(lengthscale=ard, outputscale=0.7), 3),
        ("matern-0.5", K.Matern(nu=0.5, lengthscale=0.9, outputscale=1.3), 2),
        ("matern-1.5", K.Matern(nu=1.5, lengthscale=ard), 3),
        ("matern-2.5", K.Matern(nu=2.5, lengthscale=0.4, outputscale=3.0), 2),
        ("rq", K.RationalQuadratic(lengthscale=0.8, alpha=0.3, outputscale=1.7), 3),
        ("periodic", K.Periodic(lengthscale=0.9, period=1.9), 1),
        ("linear", K.Linear(variance=0.7), 3),
        ("linear-unit", K.Linear(variance=1.0), 3),
        ("polynomial", K.Polynomial(degree=3, offset=0.5), 2),
        ("polynomial-1", K.Polynomial(degree=1, offset=2.0), 2),
        ("constant", K.Constant(1.8), 2),
        ("white", K.White(0.2), 2),
        ("scale", 3.0 * K.RBF(lengthscale=0.5), 2),
        ("scale-of-sum", 0.5 * (K.Linear(0.3) + K.Constant(2.0)), 2),
        (
            "expression",
            K.RBF(lengthscale=0.5, outputscale=2.0) * K.Periodic(lengthscale=1.2, period=0.7)
            + K.Constant(0.3) * K.Polynomial(degree=2, offset=1.5)
            + K.White(0.05),
            1,
        ),
        ("tiny-and-huge", K.Constant(1e-7) * K.RBF(lengthscale=3e5), 2),
    ]


ROUND = _pnsolve_kernels()


@pytest.mark.parametrize("pk, d", [c[1:] for c in ROUND], ids=[c[0] for c in ROUND])
def test_round_trip_keeps_the_values(pk, d):
    sk = pn.kernels.to_sklearn(pk)
    assert repr(pk.to_sklearn()) == repr(sk)
    _assert_same_values(pk, sk, d)  # scikit-learn's kernel has pnsolve's values
    back = pn.kernels.from_sklearn(sk)
    X, Y = _t(_data(9, d, 5)), _t(_data(4, d, 6))
    with torch.no_grad():
        _assert_close(back(X), _np(pk(X)), d)
        _assert_close(back(X, Y), _np(pk(X, Y)), d)
        _assert_close(back.diag(X), _np(pk.diag(X)), d)
    # every value lies within its bounds, so scikit-learn's optimiser starts there
    bounds = sk.bounds
    if len(bounds):
        assert np.all(bounds[:, 0] <= sk.theta) and np.all(sk.theta <= bounds[:, 1])


def test_to_sklearn_forms_and_bounds():
    K = pn.kernels
    assert type(K.RBF(lengthscale=0.5).to_sklearn()) is skk.RBF  # outputscale 1: bare
    sk = K.RBF(lengthscale=0.5, outputscale=2.0).to_sklearn()
    assert type(sk) is skk.Product and type(sk.k1) is skk.ConstantKernel
    assert sk.k1.constant_value == pytest.approx(2.0, rel=1e-15)
    assert tuple(sk.k1.constant_value_bounds) == (1e-5, 1e5)
    scaled = (3.0 * K.RBF(lengthscale=0.5)).to_sklearn()
    assert scaled.k1.constant_value_bounds == "fixed"
    lin = K.Linear(0.7).to_sklearn()
    assert type(lin.k2) is skk.DotProduct and lin.k2.sigma_0 == 0.0
    assert lin.k2.hyperparameter_sigma_0.fixed
    poly = K.Polynomial(degree=3, offset=4.0).to_sklearn()
    assert type(poly) is skk.Exponentiation and poly.exponent == 3
    assert poly.kernel.sigma_0 == pytest.approx(2.0, rel=1e-15)
    frozen = K.RBF(lengthscale=0.5)
    frozen.raw_lengthscale.requires_grad_(False)
    assert frozen.to_sklearn().length_scale_bounds == "fixed"
    assert tuple(K.White(1e7).to_sklearn().noise_level_bounds) == (1e-5, 1e7)


def test_round_trip_from_scikit_learn():
    sk = mauna_loa()
    back = pn.kernels.from_sklearn(sk).to_sklearn()
    _assert_same_values(pn.kernels.from_sklearn(back), sk, 1)
    assert len(back.theta) == len(sk.theta)


# ------------------------------------------------------------------------------ refusals
class _MyRBF(skk.RBF):
    pass


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: skk.PairwiseKernel(metric="laplacian"), TypeError, r"PairwiseKernel.*RBF"),
        (lambda: skk.CompoundKernel([skk.RBF()]), TypeError, "CompoundKernel"),
        (lambda: _MyRBF(1.0), TypeError, "_MyRBF"),
        (lambda: skk.RBF() + skk.PairwiseKernel(), TypeError, "PairwiseKernel"),
        (lambda: "RBF", TypeError, "str"),
        (lambda: skk.Matern(nu=1.0), ValueError, r"Matern with nu=1\.0.*0\.5, 1\.5 or 2\.5"),
        (lambda: skk.RBF() ** 2.5, ValueError, r"exponent=2\.5.*positive integer"),
        (lambda: skk.RBF() ** 0, ValueError, "exponent=0"),
        (lambda: skk.RBF() ** -2, ValueError, "exponent=-2"),
        (lambda: skk.ConstantKernel(0.0) * skk.RBF(), ValueError, "ConstantKernel.*constant_value"),
        (lambda: skk.ConstantKernel(0.0), ValueError, "ConstantKernel.*constant_value"),
        (lambda: skk.WhiteKernel(0.0), ValueError, "WhiteKernel.*noise_level"),
        (lambda: skk.DotProduct(0.0), ValueError, r"DotProduct with sigma_0=0.*fixed"),
        (lambda: skk.DotProduct(-1.0), ValueError, "DotProduct.*sigma_0"),
        (lambda: skk.RBF(0.0), ValueError, "RBF.*length_scale"),
        (lambda: skk.RationalQuadratic(length_scale=[1.0, 2.0]), ValueError, "RationalQuad"),
        (lambda: skk.RationalQuadratic(alpha=0.0), ValueError, "RationalQuadratic.*alpha"),
        (lambda: skk.ExpSineSquared(periodicity=0.0), ValueError, "ExpSineSquared.*periodicity"),
    ],
)
def test_from_sklearn_refusals_name_the_class(make, error, match):
    with pytest.raises(error, match=match):
        pn.kernels.from_sklearn(make())


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda: pn.kernels.Cosine(period=2.0), TypeError, r"Cosine.*no scikit-learn"),
        (lambda: pn.kernels.SpectralMixture(num_mixtures=2), TypeError, "SpectralMixture"),
        (
            lambda: pn.kernels.GridInterpolation(pn.kernels.RBF(), grid_size=10),
            TypeError,
            "GridInterpolation",
        ),
        (lambda: pn.kernels.RBF(active_dims=[0]), ValueError, r"RBF with active_dims=\[0\]"),
        (
            lambda: pn.kernels.RBF() + pn.kernels.White(0.1, active_dims=[1]),
            ValueError,
            "White with active_dims",
        ),
        (
            lambda: pn.kernels.Periodic(lengthscale=torch.ones(2, dtype=F64), period=2.0),
            ValueError,
            "Periodic with a vector",
        ),
        (
            lambda: pn.kernels.RationalQuadratic(lengthscale=torch.ones(2, dtype=F64)),
            ValueError,
            "RationalQuadratic with ARD",
        ),
        (lambda: "RBF", TypeError, "str"),
    ],
)
def test_to_sklearn_refusals_name_the_kernel(make, error, match):
    with pytest.raises(error, match=match):
        pn.kernels.to_sklearn(make())


def test_missing_scikit_learn_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.gaussian_process", None)
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        pn.kernels.from_sklearn(object())
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        pn.kernels.RBF().to_sklearn()


# ----------------------------------------------------------------------------------- GPs
GP_CASES = [
    # (name, kernel factory, input dimension, alpha = pnsolve's noise)
    ("mauna-loa", mauna_loa, 1, 1e-10),
    ("matern-ard", lambda: 1.5 * skk.Matern([0.6, 1.5, 0.9], nu=2.5) + skk.WhiteKernel(0.05),
     3, 1e-3),
    ("polynomial-plus-rq", lambda: skk.DotProduct(0.4) ** 2 + skk.RationalQuadratic(0.7, 1.2),
     2, 0.1),
    ("periodic", lambda: 0.8 * skk.ExpSineSquared(0.7, 1.3) * skk.RBF(3.0), 1, 0.02),
]  # fmt: skip


@pytest.mark.parametrize("make, d, alpha", [c[1:] for c in GP_CASES], ids=[c[0] for c in GP_CASES])
def test_gp_posterior_and_marginal_likelihood_equal_scikit_learns(make, d, alpha):
    n, t = 40, 15
    rng = np.random.default_rng(7)
    X = rng.uniform(-3.0, 3.0, (n, d))
    y = np.sin(2.0 * X).sum(1) + 0.1 * rng.standard_normal(n)
    Xs = rng.uniform(-3.5, 3.5, (t, d))
    sk = make()
    gpr = GaussianProcessRegressor(kernel=sk, alpha=alpha, optimizer=None).fit(X, y)
    mean_sk, std_sk = gpr.predict(Xs, return_std=True)
    lml_sk = gpr.log_marginal_likelihood(gpr.kernel_.theta)

    gp = pn.gp.ExactGP(pn.kernels.from_sklearn(sk), noise=alpha).fit(_t(X), _t(y))
    post = gp.posterior(_t(Xs))
    # both are the posterior of the latent f, whose prior variance k(x, x) includes a
    # WhiteKernel's noise (scikit-learn's alpha and pnsolve's noise enter K̂ only)
    cond = float(np.linalg.cond(sk(X) + alpha * np.eye(n)))
    tol = krylov_tol(F64, cond)
    var_scale = float(sk.diag(Xs).max())
    assert float(np.abs(_np(post.mean) - mean_sk).max()) <= tol * float(np.abs(y).max())
    assert float(np.abs(_np(post.var) - std_sk**2).max()) <= tol * var_scale
    with torch.no_grad():
        lml = float(gp.log_marginal_likelihood())
    assert abs(lml - lml_sk) <= tol * max(1.0, abs(lml_sk))
