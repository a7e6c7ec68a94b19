"""AffineGP (CAGP-GS and relatives): posteriors against dense formulas and the exact GP.

Deterministic tests (DESIGN §2 rule 8). With ``P_m`` built densely by applying the
method's :class:`~pnsolve.iterative.SweepOperator` to the identity, the posterior is

* mean ``μ + kᵀ P_m (y − μ)``,
* covariance ``k(Xs, Xs) − kᵀ P_mᵀ k − kᵀ P_m k + kᵀ P_m K̂ P_mᵀ k`` (its diagonal is
  ``var = k(x, x) − 2 kᵀ P_m k + kᵀ P_m K̂ P_mᵀ k``),
* ``comp_var = ‖K̂⁻¹ k − P_mᵀ k‖²_K̂ ≥ 0``, so ``var ≥`` the exact GP's variance;

many sweeps reproduce the exact GP. The methods' ``P_m`` themselves are checked
against the splitting formulas in ``tests/beliefs/test_affine_methods.py``; calibration
on prior draws in ``tests/statistical/test_affine_calibration.py``.
"""

from __future__ import annotations

import itertools

import pytest
import torch

import pnsolve as pn
from pnsolve.iterative import (
    Chebyshev,
    CyclicProjections,
    GaussSeidel,
    JacobiIteration,
    Richardson,
)
from pnsolve.testing import exact_tol, iterative_tol, krylov_tol

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
KERNEL = pn.kernels.Matern(nu=1.5, lengthscale=0.3)
NOISE = 0.1
PRIOR_MEAN = 0.5  # a nonzero constant prior mean, so the offset is exercised
N, T = 60, 9


def _methods(m: int, noise: float = NOISE) -> dict[str, pn.iterative.AffineMethod]:
    """Every affine method (small blocks, so several per system) with ``m`` sweeps."""
    return {
        "gauss_seidel": GaussSeidel(m, block_size=16),
        "gauss_seidel_forward": GaussSeidel(m, symmetric=False),
        "jacobi": JacobiIteration(m),
        "richardson": Richardson(m, bound="gershgorin"),
        "chebyshev": Chebyshev(m, lower=noise),
        "cyclic_projections": CyclicProjections(m, block_size=16),
        "cyclic_projections_symmetric": CyclicProjections(m, block_size=16, symmetric=True),
    }


NAMES = sorted(_methods(1))
#: Symmetric splittings whose iteration converges: E K̂⁻¹ Eᵀ = K̂^{-1/2} S^{2m} K̂^{-1/2}
#: with ‖S‖ < 1, so the variance never increases with the sweeps. (Not Chebyshev: its
#: residual polynomial of degree m is no power of the one of degree 1.)
MONOTONE = ["gauss_seidel", "jacobi", "richardson", "cyclic_projections_symmetric"]


def _data(n: int = N, t: int = T, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64)
    y = PRIOR_MEAN + torch.sin(5 * X[:, 0]) * torch.cos(3 * X[:, 1])
    y = y + 0.3 * torch.randn(n, generator=g, dtype=F64)
    return X, y, torch.rand(t, 2, generator=g, dtype=F64)


def _fit(method, X, y, noise=NOISE) -> pn.gp.AffineGP:
    with torch.no_grad():
        return pn.gp.AffineGP(KERNEL, noise, method, mean=PRIOR_MEAN).fit(X, y)


def _dense_reference(gp: pn.gp.AffineGP, X, y, Xs):
    """Mean, covariance and computational variance from the dense ``P_m``."""
    n = X.shape[0]
    with torch.no_grad():
        P = gp.belief.P @ torch.eye(n, dtype=F64)  # m sweeps on every unit vector
        Khat = KERNEL(X) + NOISE * torch.eye(n, dtype=F64)
        k = KERNEL(X, Xs)  # (n, t)
        mean = PRIOR_MEAN + k.mT @ P @ (y - PRIOR_MEAN)
        cov = KERNEL(Xs) - k.mT @ P.mT @ k - k.mT @ P @ k + k.mT @ P @ Khat @ P.mT @ k
        D = torch.linalg.solve(Khat, k) - P.mT @ k  # K̂⁻¹k − P_mᵀk
        comp = (D * (Khat @ D)).sum(0)
    return mean, cov, comp, float(torch.linalg.cond(Khat))


def _max_rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return float((a - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("sweeps", [1, 4])
@pytest.mark.parametrize("name", NAMES)
def test_posterior_is_the_dense_formula(name, sweeps):
    X, y, Xs = _data()
    gp = _fit(_methods(sweeps)[name], X, y)
    post = gp.posterior(Xs)
    mean, cov, comp, cond = _dense_reference(gp, X, y, Xs)
    tol = exact_tol(F64, N)
    assert _max_rel(post.mean, mean) <= tol
    assert _max_rel(post.var, cov.diagonal()) <= tol
    with torch.no_grad():
        full = post.cov()
    assert _max_rel(full, cov) <= tol
    # the split uses exact solves (CG to rounding level): a Krylov tolerance
    with torch.no_grad():
        assert _max_rel(post.comp_var, comp) <= krylov_tol(F64, cond)


@pytest.mark.parametrize("name", NAMES)
def test_cov_is_symmetric_with_var_on_its_diagonal(name):
    X, y, Xs = _data()
    post = _fit(_methods(3)[name], X, y).posterior(Xs)
    with torch.no_grad():
        cov = post.cov()
    tol = exact_tol(F64, N)
    assert _max_rel(cov.diagonal(), post.var) <= tol
    assert _max_rel(cov, cov.mT) <= tol


@pytest.mark.parametrize("name", NAMES)
def test_variance_is_at_least_the_exact_gp_variance(name):
    X, y, Xs = _data()
    post = _fit(_methods(3)[name], X, y).posterior(Xs)
    with torch.no_grad():
        exact = pn.gp.ExactGP(KERNEL, NOISE, mean=PRIOR_MEAN).fit(X, y).posterior(Xs)
        math_var = post.math_var
    scale = float(exact.var.max())
    tol = exact_tol(F64, N) * scale
    assert bool((post.var >= exact.var - tol).all())
    # the library's split: math_var is the exact GP's, comp_var is non-negative
    with torch.no_grad():
        cond = float(torch.linalg.cond(KERNEL(X) + NOISE * torch.eye(N, dtype=F64)))
    assert float((math_var - exact.var).abs().max()) <= krylov_tol(F64, cond) * scale
    assert bool((post.comp_var >= -krylov_tol(F64, cond) * scale).all())
    # three sweeps leave real computational uncertainty (the check is not vacuous)
    assert float(post.comp_var.max()) > iterative_tol(F64) * scale


@pytest.mark.parametrize("name", MONOTONE)
def test_variance_of_symmetric_convergent_methods_never_increases_with_sweeps(name):
    X, y, Xs = _data()
    var = [_fit(_methods(m)[name], X, y).posterior(Xs).var for m in (1, 2, 4, 8)]
    tol = exact_tol(F64, N) * float(var[0].max())
    for fewer, more in itertools.pairwise(var):
        assert bool((more <= fewer + tol).all())
    assert float((var[0] - var[-1]).max()) > tol  # and it does decrease


# K̂ = K + 1.0 I has κ ≈ 22: every method reaches rounding level in a few hundred sweeps
# (symmetric Gauss–Seidel is the slowest, ≈ 4e-8 relative error in the mean after 300).
WELL_CONDITIONED_NOISE = 1.0
MANY_SWEEPS = 600


@pytest.mark.parametrize("name", NAMES)
def test_many_sweeps_reproduce_the_exact_gp(name):
    X, y, Xs = _data()
    noise = WELL_CONDITIONED_NOISE
    gp = _fit(_methods(MANY_SWEEPS, noise)[name], X, y, noise=noise)
    post = gp.posterior(Xs)
    with torch.no_grad():
        exact = pn.gp.ExactGP(KERNEL, noise, mean=PRIOR_MEAN).fit(X, y).posterior(Xs)
        cov, exact_cov = post.cov(), exact.cov()
    tol = iterative_tol(F64)
    assert _max_rel(post.mean, exact.mean) <= tol
    assert _max_rel(post.var, exact.var) <= tol
    assert _max_rel(cov, exact_cov) <= tol
    assert gp.info.iterations == MANY_SWEEPS


# ------------------------------------------------------------------------ bad input


def test_method_must_be_an_affine_method():
    for method in ("gauss-seidel", pn.policies.CG(), GaussSeidel):
        with pytest.raises(TypeError, match=r"method must be a pnsolve\.iterative\.AffineMethod"):
            pn.gp.AffineGP(KERNEL, NOISE, method)  # type: ignore[arg-type]


def test_posterior_needs_fit():
    gp = pn.gp.AffineGP(KERNEL, NOISE, GaussSeidel(2))
    _, _, Xs = _data()
    with pytest.raises(RuntimeError, match=r"call fit\(X, y\) before asking for a posterior"):
        gp.posterior(Xs)


def test_test_inputs_must_match_the_training_inputs():
    X, y, Xs = _data()
    gp = _fit(GaussSeidel(2), X, y)
    with pytest.raises(ValueError, match="Xs must have 2 columns like the training inputs, got 3"):
        gp.posterior(torch.rand(4, 3, dtype=F64))
    with pytest.raises(ValueError, match=r"Xs must have shape \(n, d\)"):
        gp.posterior(Xs[:, 0])
    with pytest.raises(TypeError, match=r"Xs has dtype torch\.float32"):
        gp.posterior(Xs.float())


def test_bad_noise_is_refused():
    with pytest.raises(ValueError, match="noise must be a positive finite variance"):
        pn.gp.AffineGP(KERNEL, -1.0, GaussSeidel(2))
