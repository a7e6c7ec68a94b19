"""Conjugate gradients: agreement with SciPy, batched columns, stopping, residual replacement."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse.linalg as spla
import torch

import pnsolve as pn
from pnsolve.krylov import conjugate_gradient
from pnsolve.linops import Closure
from pnsolve.testing import CountingOperator, iterative_tol, krylov_tol
from pnsolve.testing.device import suite_device

F64 = torch.float64


def _rhs(n, k=None, seed=1, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    shape = (n,) if k is None else (n, k)
    return torch.randn(*shape, generator=g, dtype=F64).to(dtype)


def _relres(A, b, x):
    A, b, x = A.double(), b.double(), x.double()
    return float(torch.linalg.vector_norm(b - A @ x) / torch.linalg.vector_norm(b))


def test_iterates_match_scipy(spd):
    cond = 100.0
    A, b = spd(60, cond=cond), _rhs(60)
    ref: list[np.ndarray] = []
    spla.cg(A.numpy(), b.numpy(), rtol=1e-14, maxiter=10, callback=lambda xk: ref.append(xk.copy()))
    ours: list[torch.Tensor] = []
    x, info = pn.cg(A, b, rtol=1e-14, maxiter=10, callback=ours.append)
    assert len(ours) == len(ref) == 10 == info.iterations
    tol = krylov_tol(F64, cond)
    for xs, xo in zip(ref, ours):
        xs = torch.as_tensor(xs)
        assert float((xo - xs).norm() / xs.norm()) <= tol
    assert x.shape == (60,) and torch.equal(x, ours[-1])


@pytest.mark.parametrize("cond", [10.0, 1e4])
def test_converges_on_spd(spd, cond):
    A, b = spd(150, cond=cond, seed=3), _rhs(150)
    rtol = iterative_tol(F64)
    x, info = pn.cg(A, b, rtol=rtol)
    assert info.stop_reason is pn.StopReason.CONVERGED and bool(info.converged)
    assert _relres(A, b, x) <= rtol
    assert x.dtype == b.dtype and x.shape == b.shape
    assert info.residual_norms.shape == (info.iterations + 1,)
    assert float(info.true_residual_norms) <= float(info.tolerances)


def test_batched_columns_equal_separate_solves(spd):
    # well-conditioned and far from n iterations, so rounding does not reorder stopping
    A = spd(200, cond=10.0, seed=2)
    B = _rhs(200, 4) * torch.tensor([1.0, 1e-3, 1e3, 5.0], dtype=F64)
    B[:, 1] = A[:, :5].sum(1) * 1e-3  # a 5-dimensional Krylov space
    X, info = pn.cg(A, B, rtol=1e-8)
    assert X.shape == B.shape and info.residual_norms.shape == (info.iterations + 1, 4)
    for j in range(4):
        xj, infoj = pn.cg(A, B[:, j], rtol=1e-8)
        assert int(info.column_iterations[j]) == infoj.iterations
        assert float((X[:, j] - xj).norm() / xj.norm()) <= krylov_tol(F64, 10.0)
    assert int(info.column_iterations[1]) < int(info.column_iterations[0])


def test_per_column_stopping_rule_is_exact(spd):
    A = spd(100, cond=1e3, seed=4)
    B = _rhs(100, 3)
    B[:, 1] = A[:, :3].sum(1)  # lies in a low-dimensional Krylov space: stops early
    rtol, atol = 1e-6, 1e-3
    snapshots: list[torch.Tensor] = []
    X, info = pn.cg(A, B, rtol=rtol, atol=atol, callback=snapshots.append)
    tol = torch.clamp(rtol * B.norm(dim=0), min=atol)
    assert torch.equal(info.tolerances, tol)
    h = info.residual_norms
    for j in range(3):
        stop = int(info.column_iterations[j])
        assert h[stop, j] <= tol[j]
        assert bool((h[:stop, j] > tol[j]).all())  # no earlier iteration qualified
        assert bool((h[stop:, j] == h[stop, j]).all())  # frozen afterwards
        for snap in snapshots[stop - 1 :]:
            assert torch.equal(snap[:, j], X[:, j])  # x_j no longer changes
    assert len(set(info.column_iterations.tolist())) > 1
    assert torch.all(info.true_residual_norms <= tol)


def test_float32_true_residual_meets_tolerance(spd):
    A, b = spd(300, cond=100.0, seed=5, dtype=torch.float32), _rhs(300, dtype=torch.float32)
    rtol = 1e-5
    x, info = pn.cg(A, b, rtol=rtol)
    assert info.stop_reason is pn.StopReason.CONVERGED
    assert info.true_residual_checks >= 1
    # checked in float64 with 10% slack for the float32 evaluation of b − A x itself
    assert _relres(A, b, x) <= 1.1 * rtol
    # the naive recursive residual would have claimed convergence earlier than the truth
    assert float(info.true_residual_norms) <= float(info.tolerances)


def test_float32_unattainable_tolerance_reports_stagnation(spd):
    A, b = spd(300, cond=1e4, seed=5, dtype=torch.float32), _rhs(300, dtype=torch.float32)
    x, info = pn.cg(A, b, rtol=1e-7)
    assert info.stop_reason is pn.StopReason.STAGNATION and not bool(info.converged)
    assert info.iterations < 10 * 300
    true = torch.linalg.vector_norm(b - A @ x)
    assert torch.allclose(info.true_residual_norms, true, rtol=1e-3)


def test_counting_one_product_per_iteration(spd):
    A = CountingOperator(pn.linops.Dense(spd(120, cond=1e3, seed=6)))
    b = _rhs(120)
    _x, info = pn.cg(A, b, rtol=1e-8)
    assert info.products == A.matmat_calls == info.iterations + info.true_residual_checks
    assert info.true_residual_checks == 1  # float64: only the final confirmation
    A.reset()
    _x, info = pn.cg(A, b, x0=torch.ones(120, dtype=F64), rtol=1e-8, maxiter=5)
    assert info.products == A.matmat_calls == 1 + info.iterations + info.true_residual_checks
    assert info.stop_reason is pn.StopReason.MAX_ITERATIONS


def test_batched_products_shrink_with_active_columns(spd):
    A = CountingOperator(pn.linops.Dense(spd(60, cond=1e3, seed=7)))
    B = _rhs(60, 3)
    B[:, 0] = A.op.matrix[:, 0]
    _X, info = pn.cg(A, B, rtol=1e-8)
    assert A.matmat_calls == info.products
    assert A.matvecs == info.matvecs < 3 * info.products


def test_preconditioners_reduce_iterations(kernel):
    A = kernel(400, noise=1e-2)
    b = _rhs(400)
    g = torch.Generator().manual_seed(0)
    _, plain = pn.cg(A, b, rtol=1e-8)
    preconds = {
        "jacobi": pn.preconditioners.Jacobi(A),
        "pivchol": pn.preconditioners.PivotedCholesky(A, 60),
        "nystrom": pn.preconditioners.Nystrom(A - 1e-2 * torch.eye(400, dtype=F64), 60,
                                              generator=g, mu=1e-2),
    }  # fmt: skip
    for name, M in preconds.items():
        x, info = pn.cg(A, b, rtol=1e-8, M=M)
        assert info.stop_reason is pn.StopReason.CONVERGED, name
        assert _relres(A, b, x) <= 1e-8, name
        if name != "jacobi":  # the RBF diagonal is constant: Jacobi only rescales
            assert info.iterations < plain.iterations / 2, name
    _, dense_M = pn.cg(A, b, rtol=1e-8, M=torch.linalg.inv(A))
    assert dense_M.iterations <= 3


def test_callback_stop_and_zero_rhs(spd):
    A = spd(50, seed=8)
    calls = []
    x, info = pn.cg(A, _rhs(50), callback=lambda xk: calls.append(xk.shape) or len(calls) == 3)
    assert info.stop_reason is pn.StopReason.CALLBACK and info.iterations == 3
    assert calls == [(50,)] * 3 and not bool(info.converged)
    x, info = pn.cg(A, torch.zeros(50, dtype=F64), x0=torch.ones(50, dtype=F64))
    assert info.stop_reason is pn.StopReason.ZERO_RHS and info.iterations == 0
    assert torch.equal(x, torch.zeros(50, dtype=F64))
    B = _rhs(50, 2)
    B[:, 0] = 0
    X, info = pn.cg(A, B)
    assert info.stop_reason is pn.StopReason.CONVERGED
    assert int(info.column_iterations[0]) == 0 and torch.equal(X[:, 0], B[:, 0])


def test_maxiter_zero_and_numpy_inputs(spd):
    A = spd(40, seed=9)
    x0 = torch.ones(40, dtype=F64)
    x, info = pn.cg(A, _rhs(40), x0=x0, maxiter=0)
    assert torch.equal(x, x0) and info.iterations == 0 and x is not x0
    assert info.stop_reason is pn.StopReason.MAX_ITERATIONS
    x, info = pn.cg(A.numpy(), _rhs(40).numpy(), rtol=1e-10)
    assert isinstance(x, torch.Tensor) and bool(info.converged)


def test_bad_input(spd):
    A, b = spd(30, seed=10), _rhs(30)
    with pytest.raises(ValueError, match="b must have shape"):
        pn.cg(A, b[:20])
    with pytest.raises(TypeError, match="b has dtype"):
        pn.cg(A, b.float())
    with pytest.raises(ValueError, match="b is on device"):
        pn.cg(A, torch.empty(30, dtype=F64, device="meta"))
    with pytest.raises(ValueError, match="x0 must have the shape"):
        pn.cg(A, b, x0=torch.zeros(30, 1, dtype=F64))
    with pytest.raises(TypeError, match="x0 has dtype"):
        pn.cg(A, b, x0=torch.zeros(30))
    bad = b.clone()
    bad[3] = float("nan")
    with pytest.raises(ValueError, match="b contains NaN"):
        pn.cg(A, bad)
    with pytest.raises(ValueError, match="x0 contains Inf"):
        pn.cg(A, b, x0=torch.full((30,), float("inf"), dtype=F64))
    with pytest.raises(ValueError, match="maxiter"):
        pn.cg(A, b, maxiter=-1)
    with pytest.raises(ValueError, match="rtol"):
        pn.cg(A, b, rtol=-1e-3)
    with pytest.raises(ValueError, match="atol"):
        pn.cg(A, b, atol=float("nan"))
    with pytest.raises(ValueError, match="A must be symmetric"):
        pn.cg(A + torch.triu(torch.ones_like(A), 1), b)
    with pytest.raises(ValueError, match="A must be square"):
        pn.cg(A[:, :20], b)
    with pytest.raises(ValueError, match="M must match A"):
        pn.cg(A, b, M=torch.eye(20, dtype=F64))
    with pytest.raises(TypeError, match="callback"):
        pn.cg(A, b, callback=3)


def test_nan_in_product_names_iteration(spd):
    A = spd(30, seed=11)
    calls = {"n": 0}

    def matmat(X):
        calls["n"] += 1
        out = A @ X
        return out * float("nan") if calls["n"] == 4 else out

    op = Closure(matmat, (30, 30), dtype=F64, is_symmetric=True, device=suite_device())
    with pytest.raises(ValueError, match=r"iteration 3 \(0-based\)"):
        pn.cg(op, _rhs(30), rtol=1e-12)


def test_negative_curvature_raises_with_iteration():
    d = torch.ones(20, dtype=F64)
    d[-1] = -1.0
    b = torch.ones(20, dtype=F64)
    with pytest.raises(pn.NotPositiveDefiniteError, match="iteration") as err:
        pn.cg(torch.diag(d), b)
    assert err.value.iteration is not None and err.value.iteration >= 0
    assert isinstance(err.value, ValueError)
    with pytest.raises(pn.NotPositiveDefiniteError, match="M is not positive definite"):
        pn.cg(torch.eye(20, dtype=F64) * 2, b, M=torch.diag(d))


def test_no_spurious_curvature_error_at_rounding_level(spd):
    lam = torch.logspace(0, -15, 40, dtype=F64)
    A, b = spd(40, lam, seed=12), _rhs(40)
    _x, info = pn.cg(A, b, rtol=0.0, maxiter=400)  # runs far past attainable accuracy
    assert info.iterations >= 1
    assert info.stop_reason in (
        pn.StopReason.MAX_ITERATIONS, pn.StopReason.BREAKDOWN, pn.StopReason.STAGNATION,
        pn.StopReason.CONVERGED,
    )  # fmt: skip


def test_inf_in_product_names_iteration(spd):
    A = spd(30, seed=12)
    calls = {"n": 0}

    def matmat(X):
        calls["n"] += 1
        out = A @ X
        if calls["n"] == 3:
            out = out.clone()
            out[0] = float("inf")
        return out

    op = Closure(matmat, (30, 30), dtype=F64, is_symmetric=True, device=suite_device())
    with pytest.raises(ValueError, match=r"iteration 2 \(0-based\).*NaN or Inf"):
        pn.cg(op, _rhs(30), rtol=1e-12)


# ------------------------------------------------------------------- the core behind cg
def _core(A, B, **kw):
    from pnsolve.krylov.conjugate_gradient import cg_core

    kw.setdefault("tolerances", torch.zeros(B.shape[1], dtype=B.dtype))
    kw.setdefault("maxiter", 10 * B.shape[0])
    return cg_core(A, B, **kw)


def test_core_with_rtol_tolerances_is_cg(spd):
    A, B = pn.linops.Dense(spd(60, cond=1e3, seed=8)), _rhs(60, 3)
    x, info = pn.cg(A, B, rtol=1e-6)
    tol = 1e-6 * torch.linalg.vector_norm(B, dim=0)
    X, core_info = _core(A, B, tolerances=tol)
    assert torch.equal(X, x) and core_info.iterations == info.iterations
    assert torch.equal(core_info.residual_norms, info.residual_norms)


def test_core_per_column_tolerances(spd):
    A, B = pn.linops.Dense(spd(60, cond=1e3, seed=9)), _rhs(60, 3)
    tol = torch.tensor([1e-1, 1e-6, 1e-10], dtype=F64)
    X, info = _core(A, B, tolerances=tol)
    true = torch.linalg.vector_norm(B - A.matrix @ X, dim=0)
    assert bool((true <= tol).all()) and bool(info.converged.all())
    its = info.column_iterations.tolist()
    assert its[0] < its[1] < its[2]  # looser columns stop earlier


def test_core_stop_hook_sees_every_iteration_and_ends_the_run(spd):
    A, B = pn.linops.Dense(spd(40, cond=1e3, seed=10)), _rhs(40, 2)
    seen: list[tuple[int, torch.Tensor]] = []

    def hook(iteration, norms):
        seen.append((iteration, norms.clone()))
        return pn.StopReason.BUDGET if iteration == 4 else None

    X, info = _core(A, B, stop=hook)
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    assert info.iterations == 4 and info.stop_reason is pn.StopReason.BUDGET
    assert all(norms.shape == (2,) for _, norms in seen)
    assert torch.equal(torch.stack([n for _, n in seen]), info.residual_norms)
    # a hook that fires at once: no iteration, no preconditioner application
    M = CountingOperator(pn.linops.Dense(torch.eye(40, dtype=F64)))
    X, info = _core(A, B, M=M, stop=lambda i, n: pn.StopReason.CONVERGED)
    assert info.iterations == 0 and M.matmat_calls == 0 and torch.all(X == 0)


def test_core_without_exact_residuals_spends_no_extra_product(spd):
    cond = 1e2
    A = CountingOperator(pn.linops.Dense(spd(80, cond=cond, seed=11)))
    B = _rhs(80, 2)
    tol = 1e-9 * torch.linalg.vector_norm(B, dim=0)
    X, info = _core(A, B, tolerances=tol, exact_residuals=False, maxiter=8)
    assert info.true_residual_checks == 0 and A.matmat_calls == info.products == 8
    assert torch.equal(info.true_residual_norms, info.residual_norms[-1])
    # the classical PCG iterate: cg's up to rounding (no replacement happened in cg)
    x, _ = pn.cg(A.op, B, rtol=1e-9, maxiter=8)
    err = torch.linalg.matrix_norm(X - x) / torch.linalg.matrix_norm(x)
    assert float(err) <= krylov_tol(F64, cond)


def test_core_maxiter_zero_applies_no_preconditioner(spd):
    A, B = pn.linops.Dense(spd(30, seed=12)), _rhs(30, 2)
    M = CountingOperator(pn.linops.Dense(torch.eye(30, dtype=F64)))
    X, info = _core(A, B, x0=torch.ones(30, 2, dtype=F64), M=M, maxiter=0)
    assert info.iterations == 0 and M.matmat_calls == 0 and torch.all(X == 1)


def test_core_checks_its_arguments(spd):
    A, B = pn.linops.Dense(spd(10, seed=13)), _rhs(10, 2)
    with pytest.raises(ValueError, match="tolerances"):
        _core(A, B, tolerances=torch.zeros(3, dtype=F64))
    with pytest.raises(ValueError, match="maxiter"):
        _core(A, B, maxiter=-1)
    with pytest.raises(ValueError, match="LinearOperator"):
        _core(A.matrix, B)


# ------------------------------------------------ the deferred preconditioner test
def _nan_on_call(matrix, when):
    """A symmetric operator that returns NaN on its ``when``-th product (1-based)."""
    calls = {"n": 0}

    def matmat(X):
        calls["n"] += 1
        out = matrix @ X
        return out * float("nan") if calls["n"] == when else out

    n = matrix.shape[0]
    return Closure(matmat, (n, n), dtype=F64, is_symmetric=True, device=suite_device())


@pytest.fixture(params=["host", "general"])
def steps(request, monkeypatch):
    """Which CG step runs: the CPU's host-decided one where it applies, or the general one."""
    if request.param == "general":
        monkeypatch.setattr(conjugate_gradient, "on_host", lambda run: False)
    return request.param


@pytest.mark.parametrize("exact", [True, False])
def test_nan_from_the_preconditioner_blames_m(spd, exact, steps):
    A = pn.linops.Dense(spd(30, seed=13))
    M = _nan_on_call(torch.eye(30, dtype=F64), when=3)
    B = _rhs(30, 2)
    tol = torch.zeros(2, dtype=F64)
    with pytest.raises(pn.NotPositiveDefiniteError, match="M is not positive definite") as err:
        _core(A, B, tolerances=tol, M=M, exact_residuals=exact)
    # M's third product is the direction of iteration 2 (the first one is iteration 0's)
    assert err.value.iteration == 2


def test_nan_from_a_blames_a_in_classical_cg(spd):
    A = _nan_on_call(spd(30, seed=14), when=3)
    M = pn.linops.Dense(torch.eye(30, dtype=F64))
    B = _rhs(30, 2)
    tol = torch.zeros(2, dtype=F64)
    with pytest.raises(ValueError, match=r"iteration 2 \(0-based\)") as err:
        _core(A, B, tolerances=tol, M=M, exact_residuals=False)
    assert "M is not positive definite" not in str(err.value)


def test_an_error_inside_an_iteration_is_not_replaced(spd, steps):
    """An interrupt while a preconditioner test is still deferred is what propagates.

    The general step defers the test to the next iteration's read; the CPU's host step
    (``cg_step.host_step``) tests at once, so there the preconditioner's error comes first.
    """
    deferred = steps == "general" or suite_device().type != "cpu"
    A0 = spd(30, seed=15)
    m_calls = {"n": 0}

    def precondition(X):  # negative on the direction after iteration 0
        m_calls["n"] += 1
        return -X if m_calls["n"] == 2 else X

    M = Closure(precondition, (30, 30), dtype=F64, is_symmetric=True, device=suite_device())
    calls = {"n": 0}

    def matmat(X):
        calls["n"] += 1
        if calls["n"] == 2:  # iteration 1's product
            raise KeyboardInterrupt  # e.g. the user's Ctrl-C, mid-run
        return A0 @ X

    A = Closure(matmat, (30, 30), dtype=F64, is_symmetric=True, device=suite_device())
    if deferred:
        with pytest.raises(KeyboardInterrupt):
            pn.cg(A, _rhs(30), M=M)
    else:
        with pytest.raises(pn.NotPositiveDefiniteError, match="iteration 1") as err:
            pn.cg(A, _rhs(30), M=M)
        assert err.value.iteration == 1 and calls["n"] == 1
