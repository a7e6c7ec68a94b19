"""Affine iterative methods: ``P_m`` against dense splitting formulas, costs, bad input.

Deterministic tests (DESIGN §2 rule 8): ``P_m`` built densely by sweeping unit vectors
equals ``Σ_{j<m} (I − M⁻¹A)^j M⁻¹`` (Chebyshev: ``(I − r_m(A)) A⁻¹``), its transpose
equals the transposed method's sweeps, the mean equals ``m`` sweeps, and the methods
converge to ``A⁻¹ b``.
"""

from __future__ import annotations

import pytest
import torch
from affine_support import dense_P, methods, spd, splitting

import pnsolve as pn
from pnsolve.iterative import (
    Chebyshev,
    CyclicProjections,
    GaussSeidel,
    JacobiIteration,
    Richardson,
    affine_solve,
    spectral_bounds,
)
from pnsolve.testing import CountingOperator, exact_tol, iterative_tol
from pnsolve.testing.device import suite_device

N = 24
NAMES = sorted(methods(1))
SYMMETRIC = {n for n, m in methods(1).items() if getattr(m, "symmetric", True)}


def _relative(X: torch.Tensor, ref: torch.Tensor) -> float:
    return float((X - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("name", NAMES)
def test_P_equals_the_dense_splitting_formula(name, m):
    A = spd(N)
    P = methods(m)[name].operator(A)
    ref = dense_P(A, methods(m)[name], P.parameters)
    eye = torch.eye(N, dtype=A.dtype)
    tol = exact_tol(A.dtype, N)
    assert _relative(P.to_dense(), ref) <= tol  # unit vectors swept from zero
    assert _relative(P.rmatmat(eye), ref.mT) <= tol  # the transposed method's sweeps


@pytest.mark.parametrize("name", NAMES)
def test_symmetric_splittings_give_symmetric_P_and_A_self_adjoint_error(name):
    A = spd(N)
    P = methods(4)[name].operator(A)
    Pd = P.to_dense()
    E = torch.eye(N, dtype=A.dtype) - Pd @ A
    tol = exact_tol(A.dtype, N)
    if name in SYMMETRIC:
        assert P.is_symmetric
        assert _relative(Pd, Pd.mT) <= tol
        assert _relative(A @ E, E.mT @ A) <= tol  # E self-adjoint in the A inner product
    else:  # forward sweeps: P_mᵀ is the backward method's, not P_m
        assert not P.is_symmetric
        assert _relative(Pd, Pd.mT) > 1e-3


@pytest.mark.parametrize("name", NAMES)
def test_mean_is_m_sweeps_of_the_method(name):
    A = spd(N)
    b = torch.randn(N, dtype=A.dtype, generator=torch.Generator().manual_seed(1))
    method = methods(5)[name]
    belief, info = affine_solve(A, b, method)
    P = belief.P
    if isinstance(method, Chebyshev):
        x = dense_P(A, method, P.parameters) @ b
    else:  # the textbook iteration x ← x + M⁻¹(b − A x) from 0, densely
        M = splitting(A, method, P.parameters.get("damping", 1.0))
        x = torch.zeros_like(b)
        for _ in range(method.sweeps):
            x = x + torch.linalg.solve(M, b - A @ x)
    assert _relative(belief.mean, x) <= exact_tol(A.dtype, N)
    assert info.iterations == 5 and info.residual_norms.shape == (6,)
    true = float(torch.linalg.vector_norm(b - A @ belief.mean))
    assert abs(float(info.residual_norms[-1]) - true) <= exact_tol(A.dtype, N) * float(b.norm())
    assert float(info.residual_norms[0]) == pytest.approx(float(b.norm()))
    assert info.stop_reason is pn.StopReason.MAX_ITERATIONS


def test_gauss_seidel_iterates_do_not_depend_on_the_block_size():
    A = spd(N)
    ref = GaussSeidel(3, block_size=1).operator(A).to_dense()
    for b in (4, 7, N, 100):
        assert _relative(GaussSeidel(3, block_size=b).operator(A).to_dense(), ref) <= exact_tol(
            A.dtype, N
        )
    # cyclic projections with blocks of one row are forward point Gauss–Seidel
    forward = GaussSeidel(3, symmetric=False).operator(A).to_dense()
    ap = CyclicProjections(3, block_size=1).operator(A).to_dense()
    assert _relative(ap, forward) <= exact_tol(A.dtype, N)


def test_cyclic_projections_with_one_block_is_a_direct_solve():
    A = spd(N)
    P = CyclicProjections(1, block_size=N).operator(A).to_dense()
    assert _relative(P, torch.linalg.inv(A)) <= exact_tol(A.dtype, N) * 100  # κ = 100


@pytest.mark.parametrize("name", NAMES)
def test_many_sweeps_give_the_exact_solution_and_zero_covariance(name):
    A = spd(N, cond=10.0)
    b = torch.randn(N, dtype=A.dtype, generator=torch.Generator().manual_seed(2))
    belief, _ = affine_solve(A, b, methods(1000)[name], prior=1.0)
    x = torch.linalg.solve(A, b)
    assert float((belief.mean - x).norm() / x.norm()) <= iterative_tol(A.dtype)
    cov = belief.cov.to_dense()
    assert float(cov.abs().max()) <= iterative_tol(A.dtype)


def test_products_and_row_passes_are_counted():
    A = spd(N)
    b = torch.ones(N, dtype=A.dtype)
    # Jacobi, Richardson, Chebyshev: one product per sweep plus the Lanczos set-up
    for method in (
        JacobiIteration(6, lanczos_steps=5),
        Richardson(6, lanczos_steps=5),
        Chebyshev(6),
    ):
        op = CountingOperator(pn.linops.Dense(A))
        _, info = affine_solve(op, b, method)
        steps = getattr(method, "lanczos_steps", 10)
        assert info.products == op.products == 6 + steps
        assert info.setup_products == steps and info.row_passes == 0
    # Gauss–Seidel: two passes over the rows per symmetric sweep, one per forward sweep;
    # a generic operator pays one more pass at set-up for the diagonal blocks
    for method, passes in ((GaussSeidel(3, block_size=5), 6), (CyclicProjections(3), 3)):
        op = CountingOperator(pn.linops.Dense(A))
        _, info = affine_solve(op, b, method)
        assert info.row_passes == passes and info.products == op.products == 0
        assert op.rows_accessed == N * (passes + 1)
    # with a given damping and interval nothing is spent on the set-up
    op = CountingOperator(pn.linops.Dense(A))
    _, info = affine_solve(op, b, Chebyshev(4, lower=0.01, upper=1.1))
    assert info.products == op.products == 4 and info.setup_products == 0
    assert info.parameters == {"lower": 0.01, "upper": 1.1}


def test_kernel_system_rows_are_counted_in_epochs_and_agree_with_dense():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(40, 2, dtype=torch.float64, generator=g)
    system = pn.iterative.KernelSystem(pn.kernels.RBF(lengthscale=0.3), X, 0.1, backend="dense")
    dense = system.to_dense()
    y = torch.randn(40, dtype=torch.float64, generator=g)
    for method, epochs in ((GaussSeidel(3, block_size=10), 6), (CyclicProjections(2, 10), 2)):
        before = system.epochs
        belief, _ = affine_solve(system, y, method)
        # iterations: `passes` epochs; set-up: the diagonal blocks, 4 · 10² entries
        assert system.epochs - before == pytest.approx(epochs + 400 / 40**2)
        ref, _ = affine_solve(dense, y, method)
        assert _relative(belief.mean, ref.mean) <= exact_tol(torch.float64, 40)


def test_nonzero_start_is_the_prior_mean():
    A = spd(N)
    g = torch.Generator().manual_seed(3)
    b, x0 = torch.randn(N, dtype=A.dtype, generator=g), torch.randn(N, dtype=A.dtype, generator=g)
    belief, info = affine_solve(A, b, GaussSeidel(2), x0)
    P = belief.P.to_dense()
    assert _relative(belief.mean, x0 + P @ (b - A @ x0)) <= exact_tol(A.dtype, N)
    assert info.products == 1  # the initial residual


def test_float32_follows_the_input_dtype():
    A = spd(N).float()
    b = torch.ones(N)
    for method in methods(3).values():
        belief, info = affine_solve(A, b, method)
        assert belief.mean.dtype == torch.float32 and info.residual_norms.dtype == torch.float32


def test_spectral_bounds_enclose_the_spectrum():
    A = spd(N)
    lam = torch.linalg.eigvalsh(A)
    lanczos = spectral_bounds(A, steps=N)  # full Lanczos: Ritz values are the eigenvalues
    assert lanczos.lower == pytest.approx(float(lam[0]), rel=1e-8)
    assert lanczos.upper == pytest.approx(1.1 * float(lam[-1]), rel=1e-8)
    assert lanczos.products == N
    few = spectral_bounds(A, steps=5)
    assert few.lower >= float(lam[0]) and few.upper >= float(lam[-1])
    gersh = spectral_bounds(A, method="gershgorin")
    assert gersh.lower <= float(lam[0]) and gersh.upper >= float(lam[-1])
    D = A.diagonal().rsqrt()
    scaled = torch.linalg.eigvalsh(D[:, None] * A * D)
    jac = spectral_bounds(A, method="gershgorin", jacobi=True)
    assert jac.lower <= float(scaled[0]) and jac.upper >= float(scaled[-1])


# ------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "make", [GaussSeidel, JacobiIteration, Richardson, Chebyshev, CyclicProjections], ids=str
)
def test_sweeps_must_be_a_positive_int(make):
    with pytest.raises(ValueError, match="sweeps"):
        make(0)
    with pytest.raises(TypeError, match="sweeps"):
        make(2.0)


def test_settings_are_checked_and_named():
    with pytest.raises(ValueError, match="block_size"):
        GaussSeidel(2, block_size=0)
    with pytest.raises(ValueError, match="block_size"):
        CyclicProjections(2, block_size=0)
    with pytest.raises(ValueError, match="damping"):
        JacobiIteration(2, damping=-1.0)
    with pytest.raises(ValueError, match="bound"):
        Richardson(2, bound="power")
    with pytest.raises(ValueError, match="lower"):
        Chebyshev(2, lower=2.0, upper=1.0)
    with pytest.raises(ValueError, match="upper"):
        Chebyshev(2, upper=float("inf"))
    with pytest.raises(ValueError, match="lanczos_steps"):
        Chebyshev(2, lanczos_steps=0)


def test_bad_arguments_of_affine_solve_name_the_argument():
    A = spd(N)
    with pytest.raises(TypeError, match="method"):
        affine_solve(A, torch.ones(N, dtype=A.dtype), "gauss-seidel")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="b"):
        affine_solve(A, torch.ones(N + 1, dtype=A.dtype), GaussSeidel(1))
    with pytest.raises(ValueError, match="A must be symmetric"):
        affine_solve(A + torch.triu(torch.ones_like(A), 1), torch.ones(N), GaussSeidel(1))
    with pytest.raises(ValueError, match="prior"):
        affine_solve(A, torch.ones(N, dtype=A.dtype), GaussSeidel(1), prior=-1.0)


def test_non_spd_operators_raise_naming_A():
    A = spd(N)
    negative_diagonal = A.clone()
    negative_diagonal[3, 3] = -1.0
    for method in (GaussSeidel(1), JacobiIteration(1)):
        with pytest.raises(
            pn.NotPositiveDefiniteError, match=r"A is not positive definite.*A\[3, 3\]"
        ):
            method.operator(negative_diagonal)
    with pytest.raises(pn.NotPositiveDefiniteError, match=r"A is not positive definite.*block 0"):
        CyclicProjections(1, block_size=6).operator(negative_diagonal)
    # positive diagonal but indefinite: Lanczos finds a negative Ritz value
    lam = torch.linspace(-1.0, 2.0, N, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(N, N, dtype=torch.float64, generator=g))
    indefinite = Q @ torch.diag(lam) @ Q.mT
    indefinite = 0.5 * (indefinite + indefinite.mT)
    for method in (Chebyshev(1), Richardson(1)):
        with pytest.raises(pn.NotPositiveDefiniteError, match=r"A is not positive definite.*Ritz"):
            method.operator(indefinite)


def test_gauss_seidel_needs_row_access():
    A = spd(N)
    op = pn.linops.Closure(
        lambda X: A @ X, (N, N), dtype=A.dtype, is_symmetric=True, device=suite_device()
    )
    with pytest.raises(pn.MissingStructureError, match="to_dense"):
        GaussSeidel(1).operator(op)
    belief, _ = affine_solve(op, torch.ones(N, dtype=A.dtype), Chebyshev(2))  # products only
    assert belief.mean.shape == (N,)
