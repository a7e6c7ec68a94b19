"""Affine methods detect divergence and name the setting to change.

A convergent affine method keeps its residual within a known factor of the initial one
(Richardson and Chebyshev never let it grow, Jacobi by at most ``√(max dᵢ/min dᵢ)``,
Gauss–Seidel and cyclic projections by at most ``√κ(A)``); past
``DIVERGENCE_FACTOR`` times that bound the sweeps stop with an error instead of
returning a mean of size 1e100 as a calibrated belief.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.iterative import (
    Chebyshev,
    CyclicProjections,
    DivergenceError,
    GaussSeidel,
    JacobiIteration,
    Richardson,
    affine_solve,
)

F64 = torch.float64
N = 50
NOISE = 0.1
#: a damping far above 2/λ_max(D⁻¹K̂) ≈ 0.08 of the kernel matrix below
TOO_LARGE_DAMPING = 5.0
#: an upper bound far below λ_max(K̂) ≈ 25 of the kernel matrix below
TOO_SMALL_UPPER = 2.0
SWEEPS = 20
#: noise of an ill-conditioned kernel matrix (κ ≈ 1e9): convergent sweeps stay quiet
SMALL_NOISE = 1e-8


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(N, 1, generator=g, dtype=F64)
    return X, torch.sin(6 * X[:, 0])


def _khat() -> tuple[torch.Tensor, torch.Tensor]:
    X, y = _data()
    k = pn.kernels.RBF(lengthscale=0.2)
    return (k(X, X) + NOISE * torch.eye(N, dtype=F64)).detach(), y


def _indefinite(n: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric, positive diagonal, one negative eigenvalue: Gauss–Seidel diverges."""
    g = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=F64))
    A = (Q * torch.linspace(-0.5, 3.0, n, dtype=F64)) @ Q.mT
    A = 0.5 * (A + A.mT)
    assert bool((A.diagonal() > 0).all())
    return A, torch.randn(n, generator=g, dtype=F64)


@pytest.mark.parametrize("make", [JacobiIteration, Richardson])
def test_too_large_damping_raises_naming_damping(make):
    A, b = _khat()
    with pytest.raises(DivergenceError, match=r"damping=5.*diverges.*sweep.*use damping <"):
        affine_solve(A, b, make(sweeps=SWEEPS, damping=TOO_LARGE_DAMPING))


def test_the_divergence_error_is_a_value_error_and_an_arithmetic_error():
    A, b = _khat()
    method = JacobiIteration(sweeps=SWEEPS, damping=TOO_LARGE_DAMPING)
    for kind in (ValueError, ArithmeticError):
        with pytest.raises(kind):
            affine_solve(A, b, method)


def test_chebyshev_with_upper_below_lambda_max_raises_naming_upper():
    A, b = _khat()
    lam_max = float(torch.linalg.eigvalsh(A)[-1])
    assert TOO_SMALL_UPPER < lam_max
    method = Chebyshev(sweeps=SWEEPS, lower=NOISE, upper=TOO_SMALL_UPPER)
    with pytest.raises(DivergenceError, match=r"Chebyshev\(upper=2.*diverges.*upper ≥ λ_max"):
        affine_solve(A, b, method)


@pytest.mark.parametrize(
    "method",
    [GaussSeidel(sweeps=60), CyclicProjections(sweeps=60, block_size=4)],
    ids=["gauss-seidel", "cyclic-projections"],
)
def test_sweeps_diverging_on_an_indefinite_matrix_name_A(method):
    A, b = _indefinite()
    with pytest.raises(pn.NotPositiveDefiniteError, match=r"diverges.*A is not positive definite"):
        affine_solve(A, b, method)


def test_transposed_products_on_many_columns_are_watched_too():
    A, _ = _khat()
    P = JacobiIteration(sweeps=SWEEPS, damping=TOO_LARGE_DAMPING).operator(A)
    B = torch.eye(N, dtype=F64)[:, :3]
    with pytest.raises(DivergenceError, match="damping"):
        P.rmatmat(B)


@pytest.mark.parametrize(
    "method",
    [
        GaussSeidel(sweeps=30),
        CyclicProjections(sweeps=30, block_size=8),
        JacobiIteration(sweeps=30),
        Richardson(sweeps=30),
        Chebyshev(sweeps=30),
    ],
    ids=lambda m: type(m).__name__,
)
def test_convergent_methods_on_an_ill_conditioned_kernel_matrix_are_not_stopped(method):
    X, y = _data()
    k = pn.kernels.RBF(lengthscale=0.2)
    A = (k(X, X) + SMALL_NOISE * torch.eye(N, dtype=F64)).detach()
    belief, info = affine_solve(A, y, method)
    assert bool(torch.isfinite(belief.mean).all())
    assert float(info.residual_norms[-1]) < float(info.residual_norms[0])


def test_affine_gp_refuses_a_diverging_method_at_fit():
    """Before: ``JacobiIteration(damping=5)`` returned means of −3e38 with calibrated=True."""
    X, y = _data()
    gp = pn.gp.AffineGP(
        pn.kernels.RBF(lengthscale=0.2), NOISE, JacobiIteration(sweeps=SWEEPS, damping=5.0)
    )
    with pytest.raises(DivergenceError, match="damping"):
        gp.fit(X, y)
