"""Deterministic tests of the probabilistic linear solver loop (DESIGN §3).

Exactness after ``n`` independent actions, agreement with ``pn.cg``, one product per
iteration, breakdown, non-SPD detection, input validation, frozen states and buffer
replay.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import pnsolve as pn
from pnsolve.linops import Closure
from pnsolve.policies import Policy
from pnsolve.problems import make_problem
from pnsolve.stopping import MaxIterations, ResidualNorm
from pnsolve.testing import CountingOperator, exact_tol, iterative_tol, krylov_tol
from pnsolve.testing.device import suite_device

F64 = torch.float64


def _problem(n: int, cond: float, seed: int = 0, dtype: torch.dtype = F64):
    return make_problem(
        "exponential", n, generator=torch.Generator().manual_seed(seed), cond=cond, dtype=dtype
    )


class FixedActions(Policy):
    """Column ``i`` of a fixed matrix at iteration ``i`` (a non-adaptive policy)."""

    def __init__(self, S: torch.Tensor) -> None:
        self.S = S

    def __call__(self, state, generator):
        return self.S[:, state.iteration], None


class RepeatAction(Policy):
    """The same action every iteration: dependent from the second iteration on."""

    def __init__(self, s: torch.Tensor) -> None:
        self.s = s

    def __call__(self, state, generator):
        return self.s, None


@dataclasses.dataclass(frozen=True)
class Buffer:
    """The minimal buffer protocol: actions and their images under ``A``."""

    actions: torch.Tensor
    images: torch.Tensor


def _solver(policy=None, maxiter=10, prior="inverse", **kw):
    return pn.ProbabilisticLinearSolver(
        policy or pn.policies.CG(), MaxIterations(maxiter), prior=prior, **kw
    )


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


# --------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("prior", ["inverse", 2.0])
def test_exact_after_n_independent_actions(prior):
    n, cond = 16, 1e2
    p = _problem(n, cond)
    S = torch.randn(n, n, generator=torch.Generator().manual_seed(1), dtype=F64)
    belief, info = _solver(FixedActions(S), n, prior).solve(p.A, p.b)
    assert info.iterations == n and info.rank == n
    assert info.stop_reason is pn.StopReason.MAX_ITERATIONS
    # actions with cond(S) up to ~1e2 on top of cond(A): a Krylov-type tolerance
    tol = krylov_tol(F64, cond * float(torch.linalg.cond(S)))
    assert _rel(belief.mean, p.x_true) <= tol
    prior_scale = float(belief.prior.covariance(p.A).to_dense().norm())
    assert float(belief.cov.to_dense().norm()) <= tol * prior_scale
    if prior == "inverse":
        Ainv = torch.linalg.inv(p.A.to_dense())
        assert _rel(belief.inverse_approx.to_dense(), Ainv) <= tol


def test_cg_policy_exact_after_n_iterations():
    n, cond = 20, 1e3
    p = _problem(n, cond)
    belief, info = _solver(maxiter=n).solve(p.A, p.b)
    assert info.iterations == n
    assert _rel(belief.mean, p.x_true) <= krylov_tol(F64, cond)
    assert float(belief.cov.to_dense().norm()) <= krylov_tol(F64, cond) * float(
        torch.linalg.inv(p.A.to_dense()).norm()
    )


# ------------------------------------------------------------------ agreement with CG
def _cg_iterates(A, b, k):
    iterates = []
    pn.cg(A, b, rtol=0.0, maxiter=k, callback=lambda x: iterates.append(x.clone()))
    return iterates


def test_cg_policy_mean_equals_cg_iterates():
    n, cond, k = 40, 10.0, 10
    p = _problem(n, cond, seed=3)
    cg_x = _cg_iterates(p.A, p.b, k)
    states = list(_solver(maxiter=k).iterate(p.A, p.b))
    assert len(states) == k + 1 and len(cg_x) == k
    for state, x in zip(states[1:], cg_x, strict=True):
        assert _rel(state.belief.mean, x) <= krylov_tol(F64, cond), state.iteration


def test_cg_policy_no_worse_than_cg_after_loss_of_orthogonality():
    # Full conjugacy: once plain CG has lost orthogonality (the iterates separate),
    # the probabilistic solver's error is never larger than CG's.
    n, cond = 60, 1e8
    p = _problem(n, cond, seed=1)
    cg_x = _cg_iterates(p.A, p.b, n)
    states = list(_solver(maxiter=n).iterate(p.A, p.b))
    separated = False
    for state, x in zip(states[1:], cg_x, strict=True):
        err_pls = float(torch.linalg.norm(state.belief.mean - p.x_true))
        err_cg = float(torch.linalg.norm(x - p.x_true))
        assert err_pls <= err_cg * (1 + krylov_tol(F64)), state.iteration
        separated |= _rel(state.belief.mean, x) > iterative_tol(F64)
    assert separated, "CG did not lose orthogonality: the test problem is too easy"
    # and at the end the probabilistic solver is far ahead
    assert float(torch.linalg.norm(states[-1].belief.mean - p.x_true)) < float(
        torch.linalg.norm(cg_x[-1] - p.x_true)
    )


# ------------------------------------------------------------------ product counting
def test_one_product_per_iteration_inverse_prior():
    k = 7
    p = _problem(30, 1e3)
    A = CountingOperator(p.A)
    _belief, info = _solver(maxiter=k).solve(A, p.b)
    assert A.matmat_calls == info.products == info.iterations == k
    assert A.matvecs == info.matvecs == k
    assert A.rmatmat_calls == 0


def test_products_with_x0_are_iterations_plus_one():
    k = 5
    p = _problem(30, 1e3)
    A = CountingOperator(p.A)
    x0 = torch.ones(30, dtype=F64)
    states = list(_solver(maxiter=k).iterate(A, p.b, x0=x0))
    assert states[0].products == 1
    assert A.matmat_calls == states[-1].products == k + 1
    # the recursive residual is the true one
    r = p.b - p.A @ states[-1].belief.mean
    assert _rel(states[-1].residual, r) <= krylov_tol(F64, 1e3)


def test_general_prior_spends_two_products_per_iteration():
    k = 6
    p = _problem(30, 1e3)
    A = CountingOperator(p.A)
    _belief, info = _solver(maxiter=k, prior=1.0).solve(A, p.b)
    assert A.matmat_calls == info.products == 2 * k
    assert info.matvecs == 2 * k


def test_block_actions_count_columns():
    n, m, k = 20, 3, 4
    p = _problem(n, 1e2)
    A = CountingOperator(p.A)
    S = torch.randn(n, m * k, generator=torch.Generator().manual_seed(2), dtype=F64)

    class Blocks(Policy):
        def __call__(self, state, generator):
            i = state.iteration
            return S[:, m * i : m * (i + 1)], None

    _belief, info = _solver(Blocks(), k).solve(A, p.b)
    assert A.matmat_calls == info.products == k
    assert A.matvecs == info.matvecs == m * k
    assert info.rank == m * k


# ------------------------------------------------------------------------ breakdown
def test_repeated_action_breaks_down_without_nan():
    p = _problem(12, 1e2)
    s = torch.randn(12, generator=torch.Generator().manual_seed(0), dtype=F64)
    states = list(_solver(RepeatAction(s), 10).iterate(p.A, p.b))
    last = states[-1]
    assert last.stop_reason is pn.StopReason.BREAKDOWN
    assert last.iteration == 1 and last.belief.rank == 1
    assert last.products == 2  # the dependent action was still observed
    assert bool(torch.isfinite(last.belief.mean).all())
    assert bool(torch.isfinite(last.belief.V).all())


def test_zero_action_breaks_down_at_iteration_zero():
    p = _problem(12, 1e2)
    belief, info = _solver(RepeatAction(torch.zeros(12, dtype=F64)), 10).solve(p.A, p.b)
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    assert info.iterations == 0 and info.rank == 0
    assert bool(torch.isfinite(belief.mean).all())


def test_dependent_columns_in_a_block_are_dropped():
    p = _problem(12, 1e2)
    s = torch.randn(12, generator=torch.Generator().manual_seed(0), dtype=F64)
    block = torch.stack([s, 2 * s, -s], dim=1)
    belief, info = _solver(RepeatAction(block), 1).solve(p.A, p.b)
    assert info.stop_reason is pn.StopReason.MAX_ITERATIONS
    assert info.rank == 1
    # the belief is the one of observing s alone
    ref, _ = _solver(RepeatAction(s), 1).solve(p.A, p.b)
    assert _rel(belief.mean, ref.mean) <= exact_tol(F64, 12)


def test_converged_cg_breaks_down_instead_of_claiming_not_spd():
    # A = c·I up to rounding: CG converges in one step; afterwards the residual is
    # rounding noise. Regression: the noise was taken as a new direction and a
    # spurious NotPositiveDefiniteError followed.
    for seed in range(5):
        p = make_problem(
            "clustered",
            20,
            generator=torch.Generator().manual_seed(seed),
            clusters=[1.0],
            spread=0.0,
        )
        belief, info = _solver(maxiter=20).solve(p.A, p.b)
        assert info.stop_reason is pn.StopReason.BREAKDOWN
        assert _rel(belief.mean, p.x_true) <= krylov_tol(F64)


# ------------------------------------------------------------------------- non-SPD
def test_not_positive_definite_raises_with_iteration():
    A = torch.diag(torch.tensor([3.0, 2.0, 1.0, 1.0, 1.0, 1.0, -0.5], dtype=F64))
    b = torch.ones(7, dtype=F64)
    with pytest.raises(pn.NotPositiveDefiniteError) as err:
        _solver(maxiter=7).solve(A, b)
    assert isinstance(err.value, ValueError)
    assert err.value.iteration is not None and err.value.iteration >= 1
    assert f"iteration {err.value.iteration}" in str(err.value)


def test_negative_definite_raises_at_iteration_zero():
    A = -torch.eye(5, dtype=F64)
    with pytest.raises(pn.NotPositiveDefiniteError, match="iteration 0") as err:
        _solver(maxiter=5).solve(A, torch.ones(5, dtype=F64))
    assert err.value.iteration == 0


# --------------------------------------------------------------------- bad input
def _nan_closure(n: int, dtype=F64) -> Closure:
    return Closure(
        lambda X: torch.full_like(X, math.nan), (n, n), dtype=dtype, device=suite_device()
    )


N = 6
GOOD_A = torch.eye(N, dtype=F64) * 2
GOOD_B = torch.ones(N, dtype=F64)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"b": torch.ones(N + 1, dtype=F64)}, ValueError, "b must have shape"),
        ({"b": torch.ones(N, 2, dtype=F64)}, ValueError, "b must have shape"),
        ({"b": torch.ones(N, dtype=torch.float32)}, TypeError, "b has dtype"),
        ({"b": torch.ones(N, dtype=F64, device="meta")}, ValueError, "device"),
        ({"b": torch.full((N,), math.nan, dtype=F64)}, ValueError, "b contains NaN"),
        ({"b": torch.full((N,), math.inf, dtype=F64)}, ValueError, "b contains Inf"),
        ({"b": [1.0] * N}, TypeError, "b must be a torch.Tensor"),
        ({"x0": torch.ones(N - 1, dtype=F64)}, ValueError, "x0 must have shape"),
        ({"x0": torch.full((N,), math.inf, dtype=F64)}, ValueError, "x0 contains Inf"),
        ({"x0": torch.ones(N, dtype=torch.float32)}, TypeError, "x0 has dtype"),
        ({"A": torch.ones(N, N + 1, dtype=F64)}, ValueError, "A must be square"),
        ({"A": torch.triu(torch.ones(N, N, dtype=F64))}, ValueError, "symmetric"),
        ({"A": "matrix"}, TypeError, "A"),
        ({"generator": 0}, TypeError, "generator must be a torch.Generator"),
        ({"buffer": object()}, TypeError, "buffer must provide"),
        (
            {"buffer": Buffer(torch.ones(N, 1, dtype=F64), torch.ones(N, 2, dtype=F64))},
            ValueError,
            "same shape",
        ),
        (
            {
                "buffer": Buffer(
                    torch.ones(N, 1, dtype=F64), torch.full((N, 1), math.nan, dtype=F64)
                )
            },
            ValueError,
            "buffer.images contains NaN",
        ),
    ],
)
def test_bad_input_raises_at_iterate_call(kwargs, exc, match):
    args = {"A": GOOD_A, "b": GOOD_B, **kwargs}
    solver = _solver(maxiter=3)
    # eager: the error comes from the call, not from the first next()
    with pytest.raises(exc, match=match):
        solver.iterate(**args)
    with pytest.raises(exc, match=match):
        solver.solve(**args)


def test_nan_product_names_the_iteration():
    # A @ x0 is a product: checked when the prior state is built
    with pytest.raises(ValueError, match=r"A @ x0 produced NaN"):
        _solver(maxiter=3).solve(_nan_closure(N), GOOD_B, x0=torch.ones(N, dtype=F64))
    with pytest.raises(ValueError, match=r"A @ S at iteration 0.*NaN or Inf"):
        _solver(maxiter=3).solve(_nan_closure(N), GOOD_B)

    calls = []

    def late_nan(X):
        calls.append(1)
        return X * (math.inf if len(calls) == 3 else 2.0)

    A = Closure(late_nan, (N, N), dtype=F64, device=suite_device())
    b = torch.arange(1.0, N + 1, dtype=F64)
    with pytest.raises(ValueError, match="iteration 2"):
        _solver(pn.policies.Random(), maxiter=5).solve(
            A, b, generator=torch.Generator().manual_seed(0)
        )


def test_bad_components_raise_type_errors():
    with pytest.raises(TypeError, match=r"policy must be a pnsolve\.policies\.Policy"):
        pn.ProbabilisticLinearSolver(lambda s, g: s.residual, MaxIterations(3))
    with pytest.raises(TypeError, match="stopping must be"):
        pn.ProbabilisticLinearSolver(pn.policies.CG(), 3)
    with pytest.raises(ValueError, match="prior must be"):
        pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(3), prior="flat")
    with pytest.raises(ValueError, match="prior must be 'inverse', a positive number"):
        pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(3), prior=-1.0)


def test_bad_actions_name_the_policy_and_iteration():
    class Bad(Policy):
        def __init__(self, action):
            self.action = action

        def __call__(self, state, generator):
            return self.action, None

    for action, exc, match in [
        (torch.ones(N + 1, dtype=F64), ValueError, "shape"),
        (torch.ones(N, dtype=torch.float32), TypeError, "dtype"),
        (torch.full((N,), math.nan, dtype=F64), ValueError, "NaN"),
        ([1.0] * N, TypeError, "torch.Tensor"),
    ]:
        with pytest.raises(exc, match=rf"action of Bad at iteration 0.*{match}"):
            _solver(Bad(action), 3).solve(GOOD_A, GOOD_B)


# ------------------------------------------------------------------- states
def test_last_state_carries_stop_reason_only():
    p = _problem(15, 1e2)
    states = list(_solver(maxiter=4).iterate(p.A, p.b))
    assert [s.iteration for s in states] == [0, 1, 2, 3, 4]
    assert all(s.stop_reason is None for s in states[:-1])
    assert states[-1].stop_reason is pn.StopReason.MAX_ITERATIONS
    assert states[0].action is None and states[0].belief.rank == 0
    assert states[1].action.shape == (15, 1) and states[1].observation.shape == (15, 1)


def test_states_and_beliefs_are_frozen():
    p = _problem(10, 1e2)
    state = next(_solver(maxiter=2).iterate(p.A, p.b))
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.iteration = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.belief.mean = torch.zeros(10, dtype=F64)
    _, info = _solver(maxiter=2).solve(p.A, p.b)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.iterations = 0


def test_earlier_beliefs_do_not_change():
    # 40 iterations: the factor storage grows past its initial capacity twice.
    n, k = 60, 40
    p = _problem(n, 1e4)
    snapshots = []
    states = []
    for state in _solver(maxiter=k).iterate(p.A, p.b):
        states.append(state)
        b = state.belief
        snapshots.append((b.mean.clone(), b.V.clone(), state.residual.clone()))
    for state, (mean, V, r) in zip(states, snapshots, strict=True):
        assert torch.equal(state.belief.mean, mean)
        assert torch.equal(state.belief.V, V)
        assert torch.equal(state.residual, r)
        assert state.belief.V.shape[1] == state.iteration


def test_residual_norm_converges_and_info_reports_it():
    p = _problem(30, 1e2)
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.CG(), MaxIterations(60) | ResidualNorm(rtol=iterative_tol(F64))
    )
    belief, info = solver.solve(p.A, p.b)
    assert info.stop_reason is pn.StopReason.CONVERGED and info.converged
    assert info.residual_norms.shape == (info.iterations + 1,)
    assert float(info.residual_norms[-1]) <= iterative_tol(F64) * float(p.b.norm())
    true_r = float(torch.linalg.norm(p.b - p.A @ belief.mean))
    assert true_r <= 2 * iterative_tol(F64) * float(p.b.norm())


def test_dtype_follows_input_float32():
    p = _problem(20, 1e2, dtype=torch.float32)
    belief, _info = _solver(maxiter=20).solve(p.A, p.b)
    assert belief.mean.dtype == torch.float32 and belief.V.dtype == torch.float32
    assert _rel(belief.mean, p.x_true) <= krylov_tol(torch.float32, 1e2)


# ------------------------------------------------------------------- buffer replay
@pytest.mark.parametrize("prior", ["inverse", 1.0])
def test_buffer_replay_equals_observing_first(prior):
    n, m, k = 25, 6, 4
    p = _problem(n, 1e3, seed=5)
    S = torch.randn(n, m, generator=torch.Generator().manual_seed(7), dtype=F64)
    buf = Buffer(S, p.A @ S)

    class BlockThenCG(Policy):
        def __call__(self, state, generator):
            if state.iteration == 0:
                return S, None
            return pn.policies.CG()(state, generator)

    class CGAfterReplay(Policy):
        def __call__(self, state, generator):
            return pn.policies.CG()(state, generator)

    A = CountingOperator(p.A)
    replay = list(_solver(CGAfterReplay(), k, prior).iterate(A, p.b, buffer=buf))
    assert replay[0].iteration == 0 and replay[0].belief.rank == m
    # replay is free under the inverse prior; the general prior needs A Σ₀ Z (one block)
    replay_products = 0 if prior == "inverse" else 1
    assert replay[0].products == replay_products
    assert replay[0].matvecs == replay_products * m
    per_iteration = 1 if prior == "inverse" else 2
    assert A.matmat_calls == replay[-1].products == replay_products + per_iteration * k

    direct = list(_solver(BlockThenCG(), k + 1, prior).iterate(p.A, p.b))
    tol = krylov_tol(F64, 1e3)
    for a, b in zip(replay, direct[1:], strict=True):
        assert _rel(a.belief.mean, b.belief.mean) <= tol
        Ca, Cb = a.belief.inverse_approx.to_dense(), b.belief.inverse_approx.to_dense()
        assert _rel(Ca, Cb) <= tol
        assert _rel(a.residual, b.residual) <= tol


def test_empty_buffer_is_a_no_op():
    p = _problem(10, 1e2)
    empty = Buffer(torch.zeros(10, 0, dtype=F64), torch.zeros(10, 0, dtype=F64))
    a, _ = _solver(maxiter=3).solve(p.A, p.b, buffer=empty)
    b, _ = _solver(maxiter=3).solve(p.A, p.b)
    assert torch.equal(a.mean, b.mean)
