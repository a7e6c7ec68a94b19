"""The Newton (outer) loop of IterNCGP: each step is a computation-aware GP regression.

Tatzel, Wenger, Schneider & Hennig (2024): Newton step ``t`` on the Laplace objective is
GP regression with pseudo-targets ``ŷ_t = f_t − μ + W_t⁻¹ g_t`` and noise ``W_t⁻¹``,
solved by the probabilistic linear solver on ``A_t = K + W_t⁻¹`` (the inner loop). The
new mode ``f_{t+1} = μ + K v_t`` needs no product with ``K``: ``A_t v_t = ŷ_t − r_t`` is
known from the solver, so ``K v_t = ŷ_t − r_t − W_t⁻¹ v_t``.
"""

from __future__ import annotations

import math
from collections.abc import Generator

import torch

from ...krylov.buffer import KrylovBuffer
from ...likelihoods.gaussian import Gaussian
from ...linops.base import LinearOperator
from ...linops.sum import Sum
from ...policies.projected import Projected
from ...solvers.solver import ProbabilisticLinearSolver
from .._checks import check_nonnegative_number, check_optional_positive_int, check_positive_int
from .line_search import halve_step, laplace_objective
from .problem import LaplaceProblem
from .state import LaplaceState, NewtonStep, NewtonStopReason, newton_record

__all__ = ["check_newton_config", "newton_loop", "newton_system"]


def check_newton_config(max_newton_steps: object, newton_tol: object, max_rank: object) -> None:
    """Check the Newton loop's budget, tolerance and buffer rank; errors name the argument.

    Raises
    ------
    TypeError
        ``max_newton_steps`` not an int, ``newton_tol`` not a number, ``max_rank``
        neither ``None`` nor an int (bools refused).
    ValueError
        ``max_newton_steps < 1``, ``newton_tol`` negative or NaN, ``max_rank < 1``.
    """
    check_positive_int(max_newton_steps, "max_newton_steps")
    check_nonnegative_number(newton_tol, "newton_tol")
    check_optional_positive_int(max_rank, "max_rank")


def newton_system(
    problem: LaplaceProblem, h: torch.Tensor
) -> tuple[LinearOperator, torch.Tensor, LinearOperator]:
    """The regression of the Newton step linearised at ``f = μ + h``.

    Parameters
    ----------
    problem
        The fit's data and operators.
    h
        ``P (f − μ)`` at the linearisation point, shape ``(N,)``.

    Returns
    -------
    tuple
        ``(A, target, noise)``: the operator ``K + W⁻¹`` (``P K P + W⁺ + c (I − P)``
        for the softmax), shape ``(N, N)``; the pseudo-targets minus the prior mean
        ``h + W⁻¹ g``, shape ``(N,)``; and the noise ``W⁻¹`` (``W⁺``).
    """
    lik, y = problem.likelihood, problem.y
    F = lik.unflatten(problem.mean + h)
    noise = lik.noise(F, y)
    target = h + noise @ lik.flatten(lik.gradient(F, y))  # pseudo-targets − μ
    parts = (problem.K_informed, noise)
    A = Sum(*parts) if problem.complement is None else Sum(*parts, problem.complement)
    return A, target, noise


def newton_loop(
    problem: LaplaceProblem,
    solver: ProbabilisticLinearSolver,
    *,
    max_newton_steps: int,
    newton_tol: float,
    recycle: bool = True,
    max_rank: int | None = None,
    generator: torch.Generator | None = None,
) -> Generator[LaplaceState, None, NewtonStopReason]:
    """Run the Newton loop from ``f = μ``; yield a :class:`LaplaceState` at every change.

    One state per inner iteration (the step's replayed initial state included) and one
    at the end of each Newton step (``record`` set); the last one carries the
    ``stop_reason``, which is also the generator's return value.

    Each Newton direction comes from an inexact inner solve; the step is halved until
    ``Ψ`` does not decrease (:func:`halve_step`). When no step ascends, the direction
    was too inexact: with recycling the next outer step (it counts towards
    ``max_newton_steps``) solves the *same* Newton system again, replaying the buffer
    (no product with ``K``) and adding ``solver``'s budget of new actions; without new
    actions a re-solve would repeat the direction and the loop stops with
    :attr:`NewtonStopReason.NO_ASCENT`. A Gaussian likelihood takes one full step.

    Parameters
    ----------
    problem
        The fit's data and operators (:func:`laplace_problem`).
    solver
        The inner solver; with a projector its policy is wrapped in
        :class:`~pnsolve.policies.Projected` so actions (and the belief) stay in range ``P``.
    max_newton_steps
        Outer-loop budget (ignored for a Gaussian likelihood: one step).
    newton_tol
        Converged when the full Newton step's RMS size ``‖Δf‖ / √N`` is at most this.
    recycle
        Keep a :class:`~pnsolve.krylov.KrylovBuffer` of ``problem.K_informed`` across steps.
    max_rank
        Compress the buffer to this many directions after each step (``None``: keep all).
    generator
        Randomness for stochastic policies.

    Yields
    ------
    LaplaceState
        The loop's state; computations run under ``torch.no_grad``.

    Returns
    -------
    NewtonStopReason
        Why the loop stopped.
    """
    check_newton_config(max_newton_steps, newton_tol, max_rank)
    N, P = problem.size, problem.projector
    buffer = KrylovBuffer(problem.K_informed) if recycle else None
    if P is not None:  # keep the actions (and so the belief) in range P, see Projected
        solver = ProbabilisticLinearSolver(Projected(solver.policy, P), solver.stopping)
    gaussian = isinstance(problem.likelihood, Gaussian)
    num_steps = 1 if gaussian else max_newton_steps
    h = torch.zeros(N, dtype=problem.X.dtype, device=problem.X.device)  # P (f − μ)
    a = torch.zeros_like(h)  # K⁻¹ (f − μ), in range P
    psi = laplace_objective(problem, h, a)
    records: tuple[NewtonStep, ...] = ()
    with torch.no_grad():
        for t in range(num_steps):
            A, target, noise = newton_system(problem, h)
            size_before = 0 if buffer is None else buffer.size
            inner = None
            for inner in solver.iterate(A, target, buffer=buffer, generator=generator):
                yield LaplaceState(problem, t, inner, h, a, psi, A, buffer, records)
            assert inner is not None  # iterate yields at least the prior state
            v = inner.belief.mean
            h_new = target - inner.residual - noise @ v  # K v = A v − W⁻¹ v: no K product
            a_new = v if P is None else P @ v
            step, h_try, a_try, psi_try = halve_step(
                problem, h, a, psi, h_new, a_new, full_step=gaussian
            )
            grew = buffer is not None and buffer.size > size_before
            if buffer is not None and max_rank is not None:
                buffer.compress(max_rank, A)
            reason = None
            if step == 0.0:  # no ascent along the inexact Newton direction
                record = newton_record(t, inner, buffer, 0.0, 0.0, psi, float(a @ h))
                if not grew:  # with new actions the next step refines this system
                    reason = NewtonStopReason.NO_ASCENT
            else:
                change = float(torch.linalg.vector_norm(h_try - h)) / math.sqrt(N)
                # Converged when the full (undamped) Newton step is small: a heavily
                # damped step is small because the direction is poor, not because f is
                # near the mode.
                full = float(torch.linalg.vector_norm(h_new - h)) / math.sqrt(N)
                h, a, psi = h_try, a_try, psi_try
                record = newton_record(t, inner, buffer, step, change, psi, float(a @ h))
                if gaussian or full <= newton_tol:
                    reason = NewtonStopReason.CONVERGED
            if reason is None and t == num_steps - 1:
                reason = NewtonStopReason.MAX_NEWTON_STEPS
            records += (record,)
            yield LaplaceState(problem, t, inner, h, a, psi, A, buffer, records, record, reason)
            if reason is not None:
                return reason
    raise AssertionError("unreachable: the last Newton step sets a stop reason")
