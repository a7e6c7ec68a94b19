"""The CPU's host-decided CG iteration (:func:`pnsolve.krylov.cg_step.host_step`).

On the CPU ``pn.cg`` decides an ordinary iteration in Python. It must give the general
step's run bit for bit (the same tensor operations compute every value), and hand every
iteration that is not ordinary (a convergence claim, a residual to replace, curvature
that is not positive and finite) to the general step's code.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.krylov import cg_step, conjugate_gradient
from pnsolve.testing.strategies import spd_problems

F64 = torch.float64


def _general_only():
    """Every iteration through the general step (as on a GPU)."""
    return mock.patch.object(conjugate_gradient, "on_host", lambda run: False)


def _jacobi(A: pn.linops.LinearOperator) -> pn.linops.LinearOperator:
    return pn.linops.Dense(torch.diag(1.0 / A.to_dense().diagonal()), is_symmetric=True)


def _assert_same_run(host, general):
    (X_h, info_h), (X_g, info_g) = host, general
    assert torch.equal(X_h, X_g)
    for field in ("iterations", "products", "true_residual_checks", "stop_reason"):
        assert getattr(info_h, field) == getattr(info_g, field), field
    for field in ("residual_norms", "true_residual_norms", "column_iterations", "converged"):
        assert torch.equal(getattr(info_h, field), getattr(info_g, field)), field


@given(
    problem=spd_problems(
        n=st.integers(2, 30), dtypes=(torch.float64, torch.float32), num_rhs=st.integers(1, 3)
    ),
    rtol=st.sampled_from((1e-2, 1e-6, 1e-12)),
    preconditioned=st.booleans(),
    guess=st.booleans(),
)
def test_host_steps_give_the_general_steps_run(problem, rtol, preconditioned, guess):
    # several columns with their own tolerances stop at different iterations; float32
    # replaces residuals periodically; 1e-12 is beyond float32 (stagnation)
    A, B = problem.A, problem.b
    M = _jacobi(A) if preconditioned else None
    x0 = torch.full_like(B, 0.1) if guess else None
    kwargs = {"x0": x0, "rtol": rtol, "M": M, "maxiter": 4 * A.shape[0]}
    host = pn.cg(A, B, **kwargs)
    with _general_only():
        general = pn.cg(A, B, **kwargs)
    _assert_same_run(host, general)


def test_ordinary_iterations_are_decided_on_the_host(spd):
    A = pn.linops.Dense(spd(40, cond=100.0, seed=3))
    b = torch.randn(40, generator=torch.Generator().manual_seed(4), dtype=F64)
    with (
        mock.patch.object(conjugate_gradient, "step", wraps=cg_step.step) as general,
        mock.patch.object(cg_step, "step", wraps=cg_step.step) as handed_back,
        mock.patch.object(cg_step, "settle", wraps=cg_step.settle) as settled,
    ):
        _, info = pn.cg(A, b, rtol=1e-10)
    assert info.converged and info.true_residual_checks == 1
    # every iteration on the host; the one convergence claim settled by the general code
    assert general.call_count == 0 and handed_back.call_count == 0
    assert settled.call_count == 1


def test_a_curvature_at_rounding_level_is_handed_to_the_general_step():
    # A = diag(1, 0): the second direction has curvature 0 (rounding level), so the
    # column breaks down; the host hands that iteration to the general step
    A = pn.linops.Dense(torch.diag(torch.tensor([1.0, 0.0], dtype=F64)), is_symmetric=True)
    b = torch.tensor([1.0, 1.0], dtype=F64)
    with mock.patch.object(cg_step, "step", wraps=cg_step.step) as handed_back:
        x, info = pn.cg(A, b, rtol=1e-12)
    assert handed_back.call_count == 1
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    with _general_only():
        _assert_same_run((x, info), pn.cg(A, b, rtol=1e-12))


def test_negative_curvature_raises_as_in_the_general_step():
    A = pn.linops.Dense(torch.diag(torch.tensor([1.0, -1.0], dtype=F64)), is_symmetric=True)
    b = torch.tensor([1.0, 2.0], dtype=F64)
    with pytest.raises(pn.NotPositiveDefiniteError, match="iteration 0") as host:
        pn.cg(A, b)
    with _general_only(), pytest.raises(pn.NotPositiveDefiniteError) as general:
        pn.cg(A, b)
    assert str(host.value) == str(general.value)


def test_an_indefinite_preconditioner_is_named_as_in_the_general_step(spd):
    # M = diag(1, …, 1, -1): rᵀ M r turns negative once r leans on the last coordinate;
    # the host tests it at once, the general step one iteration later (deferred)
    A = pn.linops.Dense(spd(20, seed=5))
    diag = torch.ones(20, dtype=F64)
    diag[-1] = -1.0
    M = pn.linops.Dense(torch.diag(diag), is_symmetric=True)
    b = torch.ones(20, dtype=F64)
    b[-1] = 0.0  # the first direction is fine
    with pytest.raises(pn.NotPositiveDefiniteError, match="M is not positive definite") as host:
        pn.cg(A, b, M=M, rtol=1e-12)
    with _general_only(), pytest.raises(pn.NotPositiveDefiniteError) as general:
        pn.cg(A, b, M=M, rtol=1e-12)
    assert host.value.iteration >= 1
    assert (str(host.value), host.value.iteration) == (str(general.value), general.value.iteration)


def test_mixed_precision_runs_take_the_general_step(spd):
    A = pn.linops.Dense(spd(30, cond=50.0, seed=6))
    b = torch.ones(30, dtype=F64)
    with mock.patch.object(conjugate_gradient, "host_step", wraps=cg_step.host_step) as host:
        _, info = pn.cg(A, b, rtol=1e-10, precision="mixed")
    assert info.converged and info.precision == "mixed"
    assert host.call_count == 0
