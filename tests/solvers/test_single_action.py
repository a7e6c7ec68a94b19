"""The CPU's single-action update (:meth:`SingleAction._condition_one_on_host`).

For one action under the inverse prior on the CPU the conditioner decides with scalars
read on the host. It must compute what the general path computes (same belief to
rounding), and hand every case that path must decide (non-finite values, negative
curvature, a dependent direction, an image to recompute) back to it with nothing stored.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.solvers.conditioning import Conditioner
from pnsolve.testing import exact_tol, krylov_tol
from pnsolve.testing.strategies import spd_problems

F64 = torch.float64


@pytest.fixture
def host_calls(monkeypatch):
    """Counts the host path's answers: ``[updates, hand-backs]``."""
    counts = [0, 0]
    original = Conditioner._condition_one_on_host

    def counted(self, *args):
        n_before, norm_before = len(self.V), float(self.norm_A)
        update = original(self, *args)
        counts[update is None] += 1
        if update is None:  # a hand-back stores nothing and leaves ‖A‖'s estimate alone
            assert len(self.V) == n_before and float(self.norm_A) == norm_before
        return update

    monkeypatch.setattr(Conditioner, "_condition_one_on_host", counted)
    return counts


def _general_only(monkeypatch):
    monkeypatch.setattr(Conditioner, "_condition_one_on_host", lambda self, *a: None)


def _exponential(n: int, cond: float):
    g = torch.Generator().manual_seed(n)
    return pn.problems.make_problem("exponential", n, generator=g, cond=cond)


def _policy(name: str) -> pn.policies.Policy:
    return {
        "cg": pn.policies.CG,
        "lanczos": pn.policies.Lanczos,
        "random": pn.policies.Random,
        "unit": pn.policies.UnitVector,
    }[name]()


def _solve(policy: str, A, b, iters: int, seed: int = 0, rtol: float = 0.0):
    stopping = pn.stopping.MaxIterations(iters) | pn.stopping.ResidualNorm(rtol=rtol)
    solver = pn.ProbabilisticLinearSolver(_policy(policy), stopping)
    return solver.solve(A, b, generator=torch.Generator().manual_seed(seed))


def test_ordinary_single_actions_take_the_host_path(host_calls):
    problem = _exponential(60, 1e3)
    _, info = _solve("cg", problem.A, problem.b, 30)
    assert info.iterations == 30
    assert host_calls == [30, 0]


@given(
    problem=spd_problems(n=st.integers(2, 30), max_cond=1e4),
    policy=st.sampled_from(("cg", "lanczos", "random", "unit")),
    seed=st.integers(0, 2**16),
)
def test_host_path_gives_the_general_paths_belief(problem, policy, seed):
    # Up to a residual of 1e-6: past convergence the actions are rounding noise, and
    # which noise directions are added differs with the last bit (each path's beliefs
    # stay valid there: tests/solvers/test_belief_invariants.py runs both).
    with pytest.MonkeyPatch.context() as mp:
        host, host_info = _solve(policy, problem.A, problem.b, problem.n, seed, 1e-6)
        _general_only(mp)
        general, general_info = _solve(policy, problem.A, problem.b, problem.n, seed, 1e-6)
    A = problem.A.to_dense()
    cond = float(torch.linalg.cond(A))
    tol = krylov_tol(F64, cond)
    assert host_info.stop_reason == general_info.stop_reason
    assert host.V.shape == general.V.shape
    x_scale = float(general.mean.abs().max()) + float(problem.x_true.abs().max())
    assert float((host.mean - general.mean).abs().max()) <= tol * x_scale
    cov_h, cov_g = host.V @ host.V.mT, general.V @ general.V.mT
    assert float((cov_h - cov_g).abs().max()) <= tol * float(torch.linalg.inv(A).abs().max())


def test_non_finite_images_are_named_as_before(host_calls):
    A = torch.eye(6, dtype=F64)
    A[2, 2] = float("inf")
    b = torch.ones(6, dtype=F64)
    with pytest.raises(ValueError, match="produced NaN or Inf"):
        _solve("cg", pn.linops.Dense(A, is_symmetric=True), b, 3)
    assert host_calls[1] >= 1


def test_negative_curvature_is_raised_by_the_general_path(host_calls):
    A = torch.diag(torch.tensor([1.0, 2.0, -3.0, 4.0], dtype=F64))
    b = torch.ones(4, dtype=F64)
    with pytest.raises(pn.NotPositiveDefiniteError, match="negative curvature"):
        _solve("cg", pn.linops.Dense(A, is_symmetric=True), b, 4)
    assert host_calls[1] == 1


def test_a_repeated_action_is_a_breakdown(host_calls):
    A = torch.diag(torch.arange(1.0, 9.0, dtype=F64))
    e = torch.zeros(8, dtype=F64)
    e[3] = 1.0
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.Custom(lambda state: e), pn.stopping.MaxIterations(5)
    )
    belief, info = solver.solve(A, torch.ones(8, dtype=F64))
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    assert belief.V.shape[1] == 1 and host_calls == [1, 1]


def test_an_untrusted_image_is_recomputed_by_the_general_path(host_calls):
    # Each action is the previous one plus 1e-9 of the residual: its conjugated image
    # keeps ~1e-9 of the terms it is formed from, so the recursion's error bound exceeds
    # √eps and the general path recomputes the image with one product.
    A = _exponential(40, 1e2).A

    def near_previous(state):
        r = state.residual / torch.linalg.vector_norm(state.residual)
        if state.action is None:
            return r
        prev = state.action[:, 0]
        return prev / torch.linalg.vector_norm(prev) + 1e-9 * r

    solver = pn.ProbabilisticLinearSolver(
        pn.policies.Custom(near_previous), pn.stopping.MaxIterations(6)
    )
    b = torch.ones(40, dtype=F64)
    belief, info = solver.solve(A, b)
    assert info.products > info.iterations  # the recomputed images
    assert host_calls[1] >= 1
    with pytest.MonkeyPatch.context() as mp:  # the same run on the general path alone
        _general_only(mp)
        general, general_info = solver.solve(A, b)
    assert (info.iterations, info.products) == (general_info.iterations, general_info.products)
    tol = exact_tol(F64, 40)  # the host path rounds its scalars in Python floats
    assert float((belief.V - general.V).abs().max()) <= tol * float(general.V.abs().max())
    assert float((belief.mean - general.mean).abs().max()) <= tol * float(general.mean.abs().max())
