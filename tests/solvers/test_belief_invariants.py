"""Invariants of every belief the solver produces, with and without replayed Krylov buffers.

Under the inverse prior the belief is ``Σ_i = A⁻¹ − V Vᵀ`` with ``Vᵀ A V = I``. Three
invariants make it a belief at all: rank ``≤ n``; ``Vᵀ A V = I`` to rounding (relative
error ``O(κ eps)``, :func:`~pnsolve.testing.conjugacy_tol`); ``Σ_i ⪰ 0`` (smallest
eigenvalue ``≥ −tol``). They must survive a buffer recorded on ``K + D₁`` and replayed
on ``K + D₂``, solves run far past convergence (where the residual stalls at rounding
level and the policy keeps proposing nearly the same action), and adversarial custom
policies whose actions are nearly dependent on the previous one.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.krylov import KrylovBuffer
from pnsolve.testing import CountingOperator, conjugacy_tol
from pnsolve.testing.strategies import spd_problems

F64, F32 = torch.float64, torch.float32


@pytest.fixture(autouse=True, scope="module", params=["host path", "device path", "general path"])
def conditioning_path(request):
    """Every invariant on each update path: the CPU's (single actions decided with host
    scalars), the one taken off the CPU (one host read per single action), forced here
    on CPU, and the general path alone (every single action through the block update)."""
    from pnsolve.solvers.conditioning import Conditioner

    with pytest.MonkeyPatch.context() as mp:
        if request.param == "device path":
            mp.setattr(Conditioner, "_device_path", staticmethod(lambda A: True))
        if request.param == "general path":
            mp.setattr(Conditioner, "_condition_one_on_host", lambda self, *args: None)
        yield request.param


def _near_previous(tau: float):
    """Custom policy: the previous action plus ``tau`` times the residual (heavy cancellation)."""

    def fn(state):
        if state.action is None:
            return state.residual
        prev = state.action[:, 0]
        r = state.residual
        return prev / torch.linalg.vector_norm(prev) + tau * r / torch.linalg.vector_norm(r)

    return pn.policies.Custom(fn)


def _policy(name: str, tau: float) -> pn.policies.Policy:
    if name == "cg":
        return pn.policies.CG()
    if name == "random":
        return pn.policies.Random()
    return _near_previous(tau)


def _check_belief(
    belief, A_dense: torch.Tensor, cond: float, where: str, products: torch.dtype | None = None
) -> None:
    """The three invariants, to the tolerance of the products' dtype (default ``V``'s)."""
    n = A_dense.shape[0]
    V = belief.V.to(F64)
    tol = conjugacy_tol(products or belief.V.dtype, cond, n)
    assert V.shape[1] <= n, f"{where}: rank {V.shape[1]} > n = {n}"
    if V.shape[1] == 0:
        return
    A = A_dense.to(F64)
    E = V.mT @ A @ V - torch.eye(V.shape[1], dtype=F64)
    assert float(E.abs().max()) <= tol, f"{where}: ‖VᵀAV − I‖ = {float(E.abs().max()):.3e}"
    # Σ_i = A⁻¹ − V Vᵀ, whitened: I − A^{½} V Vᵀ A^{½} has eigenvalues 1 − eig(Vᵀ A V)
    lam, Q = torch.linalg.eigh(A)
    half = (Q * lam.sqrt()) @ Q.mT
    W = half @ V
    low = float(torch.linalg.eigvalsh(torch.eye(n, dtype=F64) - W @ W.mT).min())
    assert low >= -tol, f"{where}: whitened covariance has eigenvalue {low:.3e}"


def _cond(A: torch.Tensor) -> float:
    lam = torch.linalg.eigvalsh(A.to(F64))
    return float(lam[-1] / lam[0])


@given(
    problem=spd_problems(n=st.integers(2, 24), max_cond=1e4),
    shift=st.floats(1e-3, 1.0),
    change=st.floats(-0.5, 0.5),
    seed=st.integers(0, 2**16),
    policy=st.sampled_from(("cg", "custom", "random")),
    tau=st.sampled_from((1e-3, 1e-6, 1e-9)),
)
def test_replayed_buffer_keeps_every_belief_valid(problem, shift, change, seed, policy, tau):
    # K from a named spectrum (rank-deficient ones included), D₁ and D₂ diagonal and
    # positive; 2n iterations on each system, so every solve runs past convergence.
    K = problem.A.to_dense()
    n = K.shape[0]
    g = torch.Generator().manual_seed(seed)
    d1 = shift * (0.5 + torch.rand(n, generator=g, dtype=F64))
    d2 = d1 * (1.0 + change * torch.rand(n, generator=g, dtype=F64))
    Kop = pn.linops.as_linop(K)
    buffer = KrylovBuffer(Kop)
    solver = pn.ProbabilisticLinearSolver(_policy(policy, tau), pn.stopping.MaxIterations(2 * n))
    b = problem.b
    for label, d in (("record", d1), ("replay", d2)):
        A = Kop + pn.linops.Diagonal(d)
        A_dense = K + torch.diag(d)
        cond = _cond(A_dense)
        gen = torch.Generator().manual_seed(seed)
        for state in solver.iterate(A, b, buffer=buffer, generator=gen):
            _check_belief(state.belief, A_dense, cond, f"{label} {policy} it {state.iteration}")


@given(
    problem=spd_problems(n=st.integers(2, 24), max_cond=1e2, dtypes=(F32,)),
    policy=st.sampled_from(("cg", "custom", "random")),
    seed=st.integers(0, 2**16),
)
def test_float32_beliefs_stay_valid_past_convergence(problem, policy, seed):
    n = problem.n
    A_dense = problem.A.to_dense()
    solver = pn.ProbabilisticLinearSolver(_policy(policy, 1e-3), pn.stopping.MaxIterations(2 * n))
    gen = torch.Generator().manual_seed(seed)
    cond = _cond(A_dense)
    for state in solver.iterate(problem.A, problem.b, generator=gen):
        _check_belief(state.belief, A_dense, cond, f"{policy} it {state.iteration}")


@given(
    problem=spd_problems(n=st.integers(2, 24), max_cond=1e4),
    policy=st.sampled_from(("cg", "custom", "random")),
    seed=st.integers(0, 2**16),
)
def test_mixed_precision_beliefs_stay_valid_past_convergence(problem, policy, seed):
    # float32 products, float64 factors: the invariants hold to float32's tolerance
    n = problem.n
    A_dense = problem.A.to_dense()
    solver = pn.ProbabilisticLinearSolver(
        _policy(policy, 1e-3), pn.stopping.MaxIterations(2 * n), precision="mixed"
    )
    gen = torch.Generator().manual_seed(seed)
    cond = _cond(A_dense)
    for state in solver.iterate(problem.A, problem.b, generator=gen):
        assert state.belief.V.dtype == F64
        _check_belief(state.belief, A_dense, cond, f"mixed {policy} it {state.iteration}", F32)


def test_replay_on_a_shifted_kernel_matrix_regression():
    # The reported case: a buffer recorded on K + 4.00 I and replayed on K + 4.01 I with
    # CG run to 60 iterations (n = 30). Before the fix 8 of 10 right-hand sides ended at
    # rank 37–79 > n and a covariance eigenvalue down to −13.6.
    n = 30
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 2, generator=g, dtype=F64)
    K = pn.kernels.RBF(lengthscale=1.0)(X, X).detach()
    Kop = pn.linops.as_linop(K)
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(60))
    for _ in range(10):
        b = torch.randn(n, generator=g, dtype=F64)
        buffer = KrylovBuffer(Kop)
        solver.solve(Kop + pn.linops.ScaledIdentity(n, 4.0, dtype=F64), b, buffer=buffer)
        A = Kop + pn.linops.ScaledIdentity(n, 4.01, dtype=F64)
        belief, info = solver.solve(A, b, buffer=buffer)
        A_dense = A.to_dense()
        assert info.stop_reason is pn.StopReason.BREAKDOWN
        _check_belief(belief, A_dense, _cond(A_dense), "replay")
        # the buffer keeps only informative actions: at most n of them per solve
        assert buffer.size <= 2 * n


@pytest.mark.parametrize("dtype", [F64, F32])
def test_stalled_residual_does_not_add_the_same_direction_again(dtype):
    # Past convergence CG proposes (nearly) the same residual every iteration; a
    # direction already observed must be recognised as dependent, never re-added.
    problem = pn.problems.exponential_decay(
        40, cond=1e3, generator=torch.Generator().manual_seed(3), dtype=dtype
    )
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(200))
    belief, info = solver.solve(problem.A, problem.b)
    A_dense = problem.A.to_dense()
    assert info.rank <= 40
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    assert info.residual_norms.shape == (info.iterations + 1,)  # one norm per iteration
    _check_belief(belief, A_dense, 1e3, "stalled")


def _low_spectrum_problem(n: int, cond: float):
    """``A`` with log-spaced eigenvalues and ``b`` in its three lowest eigenvectors.

    Every early action lies near ``λ_min``, so the solver's running estimate of ``‖A‖``
    from the observed ``‖A s‖ / ‖s‖`` starts ``κ`` times too small.
    """
    g = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=F64))
    A = (Q * torch.logspace(0, math.log10(cond), n, dtype=F64)) @ Q.T
    return 0.5 * (A + A.T), Q[:, :3].sum(1)


@pytest.mark.parametrize(("n", "cond"), [(20, 1e6), (40, 1e6), (40, 1e8)])
def test_image_errors_are_judged_against_the_full_norm_of_A(n, cond):
    # Image-error estimates scaled by a running ‖A‖ estimate were κ times too small
    # here, so untrustworthy images were kept: ‖VᵀAV − I‖ reached 3.1e-6 (κ = 1e6) and
    # 1.8e-3 (κ = 1e8). They are kept in units of eps·‖A‖ and the estimate of ‖A‖
    # starts from the structured diagonal.
    A, b = _low_spectrum_problem(n, cond)
    solver = pn.ProbabilisticLinearSolver(_near_previous(1e-6), pn.stopping.MaxIterations(2 * n))
    for state in solver.iterate(A, b):
        _check_belief(state.belief, A, cond, f"it {state.iteration}")


@pytest.mark.parametrize("prior", ["inverse", 1.0])
def test_every_product_is_counted_also_on_breakdown(prior):
    # A recomputed image followed by a breakdown, and the general prior's extra product
    # on the breaking iteration, were missing from info.products.
    A, b = _low_spectrum_problem(20, 1e8)
    counted = CountingOperator(pn.linops.as_linop(A))
    policy = _near_previous(1e-6) if prior == "inverse" else pn.policies.CG()
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(40), prior=prior)
    _, info = solver.solve(counted, b if prior == "inverse" else torch.ones(20, dtype=F64))
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    assert info.products == counted.products
