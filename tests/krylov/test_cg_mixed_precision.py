"""Mixed-precision CG: float32 products, float64 recurrences and answers."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings

import pnsolve as pn
from pnsolve.krylov.condition_monitor import ConditionMonitor, condition_limit
from pnsolve.krylov.mixed_precision import PRECISIONS, low_precision_products
from pnsolve.linops import Closure, Dense, LinearOperator
from pnsolve.testing import CountingOperator, iterative_tol, krylov_tol, spd_problems

F64, F32 = torch.float64, torch.float32
pytestmark = pytest.mark.usefixtures("one_thread")


def _relres(A: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(b - A @ x) / torch.linalg.vector_norm(b))


@pytest.mark.parametrize(("lengthscale", "noise"), [(0.3, 1.0), (0.5, 0.1), (1.0, 0.1)])
def test_reaches_float64_accuracy_within_one_and_a_half_times_the_iterations(
    lengthscale, noise, rbf_system
):
    # RBF kernel matrices with κ ≈ 41, 1.3e3 and 4.9e3 (below the fallback limit)
    K, b = rbf_system(1500, lengthscale, noise)
    rtol = iterative_tol(F64)
    _, full = pn.cg(K, b, rtol=rtol)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback here
        x, info = pn.cg(K, b, rtol=rtol, precision="mixed")
    assert info.converged and info.precision == "mixed" and x.dtype == F64
    assert _relres(K, b, x) <= rtol
    assert float(info.true_residual_norms) <= float(info.tolerances)
    assert info.iterations <= 1.5 * full.iterations


def test_products_run_in_float32_and_true_residuals_in_float64(rbf_system):
    K, b = rbf_system(400, 0.5, 0.1)
    A = CountingOperator(pn.linops.as_linop(K))  # logs the float32 copy's products too
    _, info = pn.cg(A, b, rtol=1e-10, precision="mixed")
    assert info.converged
    assert A.product_dtypes.count(F32) == info.iterations
    # the reliable updates and the final claim
    assert A.product_dtypes.count(F64) == info.true_residual_checks >= 2
    assert info.products == len(A.product_dtypes)


@settings(max_examples=25, deadline=None)
@given(problem=spd_problems(n=40, max_cond=1e3))
def test_any_moderately_conditioned_spd_system(problem):
    A, b = problem.A.to_dense(), problem.b
    if not bool(b.abs().max() > 0):
        return
    rtol = iterative_tol(F64)
    _, full = pn.cg(A, b, rtol=rtol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the fallback, where κ > its limit
        x, info = pn.cg(A, b, rtol=rtol, precision="mixed")
    assert info.converged == full.converged
    if full.converged:
        assert _relres(A, b, x) <= rtol
        # a few iterations on top: the fallback restarts, and CG here needs about n
        assert info.iterations <= 1.5 * full.iterations + 12


def test_ill_conditioned_systems_fall_back_to_full_precision_with_a_warning(rbf_system):
    K, b = rbf_system(1500, 2.0, 1e-3)  # κ ≈ 1e6: float32 products cost 2.7× the iterations
    _, full = pn.cg(K, b, rtol=1e-10)
    with pytest.warns(RuntimeWarning, match=r"precision='mixed'.*κ\(A\)"):
        x, info = pn.cg(K, b, rtol=1e-10, precision="mixed")
    assert info.converged and info.precision == "full" and _relres(K, b, x) <= 1e-10
    assert info.iterations <= 1.1 * full.iterations + 15  # the iterations before the switch
    assert info.products == info.iterations + info.true_residual_checks  # the restart's too


def test_block_right_hand_sides_and_a_preconditioner(rbf_system):
    K, _ = rbf_system(800, 0.5, 0.1)
    B = torch.randn(800, 3, generator=torch.Generator().manual_seed(5), dtype=F64)
    M = pn.linops.Diagonal(1.0 / torch.diagonal(K))
    X, info = pn.cg(K, B, rtol=1e-10, M=M, precision="mixed")
    assert bool(info.converged.all()) and X.dtype == F64
    res = torch.linalg.vector_norm(B - K @ X, dim=0) / torch.linalg.vector_norm(B, dim=0)
    assert float(res.max()) <= 1e-10


def test_matrix_free_kernel_operator():
    X = torch.randn(600, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
    k = pn.kernels.RBF(lengthscale=0.7) + pn.kernels.Periodic(lengthscale=1.0, period=2.0)
    K = k.linop(X, backend="chunked").add_diagonal(0.5)
    b = torch.randn(600, generator=torch.Generator().manual_seed(3), dtype=F64)
    low = low_precision_products(K, "mixed")
    assert low.low.ops[0].X1.dtype == F32  # the tiles are evaluated in float32
    with torch.no_grad():
        x, info = pn.cg(K, b, rtol=1e-10, precision="mixed")
        assert info.converged and _relres(K.to_dense(), b, x) <= 1e-10


def test_bfloat16_products_on_a_well_conditioned_system(rbf_system):
    K, b = rbf_system(500, 0.3, 1.0)  # κ ≈ 40, below bfloat16's limit of about 80
    assert condition_limit(torch.finfo(torch.bfloat16).eps) > 40
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, info = pn.cg(K, b, rtol=1e-10, precision="mixed-bf16")
    assert info.converged and info.precision == "mixed-bf16" and _relres(K, b, x) <= 1e-10


@pytest.mark.parametrize("precision", ["mixed-tf32", "full"])
def test_other_precisions_answer_in_float64(precision, rbf_system):
    K, b = rbf_system(300, 0.5, 0.1)
    x, info = pn.cg(K, b, rtol=1e-10, precision=precision)
    assert info.converged and _relres(K, b, x) <= 1e-10 and info.precision == precision


def test_bad_precision_arguments_are_named():
    A = torch.eye(4, dtype=F64)
    b = torch.ones(4, dtype=F64)
    with pytest.raises(ValueError, match="precision must be one of"):
        pn.cg(A, b, precision="half")
    with pytest.raises(ValueError, match=r"precision='mixed'.*float32"):
        pn.cg(A.float(), b.float(), precision="mixed")
    op = Closure(lambda X: X, (4, 4), dtype=F64, is_symmetric=True)
    with pytest.raises(ValueError, match="precision='mixed' needs an A"):
        pn.cg(op, b, precision="mixed")
    assert set(PRECISIONS) == {"full", "mixed", "mixed-tf32", "mixed-bf16"}


def test_a_dense_operator_keeps_a_float32_copy():
    A = Dense(torch.eye(3, dtype=F64) * 2)
    low = low_precision_products(A, "mixed")
    assert low.low.matrix.dtype == F32 and low.dtype == F64
    assert torch.equal(low.diagonal(), A.diagonal())  # the exact diagonal, not float32's


def test_condition_estimate_from_the_step_sizes():
    # CG on diag(λ) with λ log-spaced over [1e-3, 1]: κ(T) approaches 1e3 from below
    lam = torch.logspace(-3, 0, 500, dtype=F64)
    b = torch.ones(500, dtype=F64)
    monitor = ConditionMonitor(1, b[:, None])
    x, r = torch.zeros_like(b), b.clone()
    p, rz = r.clone(), r @ r
    idx = torch.zeros(1, dtype=torch.long)
    for _ in range(40):  # before CG loses orthogonality (Lanczos here reorthogonalises)
        Ap = lam * p
        alpha = rz / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        beta = (r @ r) / rz
        p, rz = r + beta * p, r @ r
        monitor.record_alpha(idx, alpha[None])
        monitor.record_beta(idx, beta[None])
    kappa = monitor.estimate(0)
    # CG's step sizes are the Lanczos tridiagonal started at b: the same Ritz values
    T = pn.lanczos(pn.linops.Diagonal(lam), b, 40).T
    ritz = torch.linalg.eigvalsh(T.to_dense() if isinstance(T, LinearOperator) else T)
    assert kappa == pytest.approx(float(ritz[-1] / ritz[0]), rel=krylov_tol(F64, 1e3))
    assert 0.6e3 <= kappa <= 1e3 * (1 + krylov_tol(F64, 1e3))  # from below
