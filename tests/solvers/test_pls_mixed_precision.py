"""The PLS and IterGP with ``precision="mixed"``: float32 products, float64 beliefs."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import CountingOperator, conjugacy_tol, iterative_tol, rtol_for

F64, F32 = torch.float64, torch.float32
pytestmark = pytest.mark.usefixtures("one_thread")


def _solver(precision: str, rtol: float = 1e-10, maxiter: int = 2000):
    stopping = pn.stopping.ResidualNorm(rtol=rtol) | pn.stopping.MaxIterations(maxiter)
    return pn.ProbabilisticLinearSolver(pn.policies.CG(), stopping, precision=precision)


@pytest.mark.parametrize(("lengthscale", "noise"), [(0.5, 0.1), (1.0, 1e-2), (2.0, 1e-3)])
def test_reaches_float64_accuracy_in_the_same_iterations(lengthscale, noise, rbf_system):
    # κ ≈ 9e2, 5e4 and 1e6: full re-orthogonalisation keeps float32 products from slowing
    # the PLS (unlike CG), and the reliable updates with their Galerkin correction reach
    # float64's residual; measured: the same iteration counts, +1 at κ = 1e6
    K, b = rbf_system(800, lengthscale, noise)
    rtol = iterative_tol(F64)
    _, info_full = _solver("full").solve(K, b)
    mixed, info = _solver("mixed").solve(K, b)
    assert info.stop_reason is pn.StopReason.CONVERGED
    relres = float(torch.linalg.vector_norm(b - K @ mixed.mean) / b.norm())
    assert relres <= rtol and mixed.mean.dtype == F64
    assert info.iterations <= info_full.iterations + 2
    # the products: one per iteration plus the true residuals of the reliable updates
    assert info_full.iterations < info.products <= info.iterations + 8


def test_products_run_in_float32_and_replacements_in_float64(rbf_system):
    K, b = rbf_system(300, 0.5, 0.1)
    A = CountingOperator(pn.linops.as_linop(K))  # logs the float32 copy's products too
    _, info = _solver("mixed").solve(A, b)
    assert A.product_dtypes.count(F32) == info.iterations
    assert A.product_dtypes.count(F64) == info.products - info.iterations >= 2
    assert info.stop_reason is pn.StopReason.CONVERGED


def test_belief_is_float64_and_conjugate_to_float32_accuracy(rbf_system):
    K, b = rbf_system(400, 0.5, 0.1)
    cond = float(torch.linalg.cond(K))
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.Lanczos(start="random"), pn.stopping.MaxIterations(60), precision="mixed"
    )
    belief, _ = solver.solve(K, b, generator=torch.Generator().manual_seed(0))
    V = belief.V
    assert V.dtype == F64 and belief.cov.dtype == F64
    err = float((V.mT @ K @ V - torch.eye(V.shape[1], dtype=F64)).abs().max())
    assert err <= conjugacy_tol(F32, cond, 400)


def test_problinsolve_and_itergp_take_the_argument(rbf_system):
    K, b = rbf_system(300, 0.5, 0.1)
    belief, info = pn.problinsolve(K, b, rtol=1e-10, maxiter=300, precision="mixed")
    assert info.stop_reason is pn.StopReason.CONVERGED
    assert float(torch.linalg.vector_norm(b - K @ belief.mean) / b.norm()) <= 1e-10
    g = torch.Generator().manual_seed(1)
    X = torch.rand(200, 2, generator=g, dtype=F64)
    y = torch.sin(6 * X[:, 0]) + 0.1 * torch.randn(200, generator=g, dtype=F64)
    Xs = torch.rand(30, 2, generator=g, dtype=F64)
    posts = {}
    for precision in ("full", "mixed"):
        gp = pn.gp.IterGP(
            pn.kernels.RBF(lengthscale=0.3),
            0.1,
            pn.policies.CG(),
            pn.stopping.MaxIterations(40),
            backend="chunked",
            precision=precision,
        )
        with torch.no_grad():
            posts[precision] = gp.fit(X, y).posterior(Xs)
    full, mixed = posts["full"], posts["mixed"]
    assert mixed.mean.dtype == F64 and mixed.var.dtype == F64
    tol = rtol_for(F32)  # float32 products: agreement to about √eps₃₂
    assert float((mixed.mean - full.mean).abs().max()) <= tol * float(full.mean.abs().max())
    # the variance is the prior's (1 here) minus what the data explain: its error is
    # relative to the prior variance
    assert float((mixed.var - full.var).abs().max()) <= tol * 1.0


def test_bad_precision_is_named(rbf_system):
    with pytest.raises(ValueError, match="precision must be one of"):
        pn.ProbabilisticLinearSolver(
            pn.policies.CG(), pn.stopping.MaxIterations(3), precision="single"
        )
    K, b = rbf_system(20, 0.5, 0.1)
    with pytest.raises(ValueError, match=r"precision='mixed'.*float32"):
        _solver("mixed").solve(K.float(), b.float())


@pytest.mark.parametrize("precision", ["mixed-bf16", "mixed-tf32"])
def test_products_too_coarse_for_the_update_are_refused(precision):
    # bfloat16 (eps 7.8e-3) read every action as dependent at n = 400: a breakdown at
    # iteration 0, nothing learned; the solver refuses them by name instead
    with pytest.raises(ValueError, match=r"precision must be one of \('full', 'mixed'\)"):
        _solver(precision)
