"""What the Newton loop of :class:`~pnsolve.gp.IterNCGP` produces: states, records, stop reasons.

Only :func:`~pnsolve.gp.laplace.newton_loop` creates these objects; they are frozen, so a
model that keeps the last :class:`LaplaceState` keeps a consistent snapshot of its fit.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from ...beliefs.gaussian_solution import GaussianSolutionBelief
from ...krylov.buffer import KrylovBuffer
from ...linops.base import LinearOperator
from ...solvers.state import SolverState
from .problem import LaplaceProblem

__all__ = ["LaplaceState", "NewtonStep", "NewtonStopReason", "newton_record"]


class NewtonStopReason(str, enum.Enum):
    """Why the Newton (outer) loop stopped.

    A ``str`` enum: a member equals its value (``NewtonStopReason.CONVERGED ==
    "converged"``) and prints as it (``f"{reason}"`` gives ``converged``).
    """

    #: The RMS size of the full (undamped) inexact Newton step fell below ``newton_tol``
    #: (always, after its single step, for a Gaussian likelihood).
    CONVERGED = "converged"
    #: ``max_newton_steps`` outer steps were taken without meeting ``newton_tol``.
    MAX_NEWTON_STEPS = "max_newton_steps"
    #: Step halving found no increase of the Laplace objective along the inexact Newton
    #: direction and the inner solve could not be refined (no recycling, or the step
    #: added no new direction to the buffer): give the inner solver more iterations.
    NO_ASCENT = "no_ascent"

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)


@dataclass(frozen=True)
class NewtonStep:
    """Record of one outer (Newton) step of :class:`~pnsolve.gp.IterNCGP`.

    Attributes
    ----------
    step
        Newton step ``t`` (0-based).
    iterations
        Inner solver iterations in this step (new actions, not counting the replay).
    products
        Products with ``K`` (kernel matrix) in this step: one per inner iteration.
    buffer_size
        Buffered actions after the step (after compression).
    change
        RMS change of the latent mode ``‖f_{t+1} − f_t‖ / √N``.
    log_likelihood
        ``Σ log p(y | f_{t+1})`` at the new mode.
    step_size
        Fraction of the (inexact) Newton step taken (``1`` unless step halving on the
        Laplace objective shortened it; ``0``: no ascent found, the mode is unchanged
        and, with recycling, the next step refines the same Newton system).
    objective
        The Laplace objective ``Ψ = Σ log p(y | f) − ½ (f − μ)ᵀ K⁻¹ (f − μ)`` after the step.
    """

    step: int
    iterations: int
    products: int
    buffer_size: int
    change: float
    log_likelihood: float
    step_size: float
    objective: float


def newton_record(
    t: int,
    inner: SolverState,
    buffer: KrylovBuffer | None,
    step_size: float,
    change: float,
    objective: float,
    ah: float,
) -> NewtonStep:
    """The :class:`NewtonStep` of step ``t`` ending with the inner state ``inner``.

    Parameters
    ----------
    t
        Newton step (0-based).
    inner
        The inner solver's last state of this step.
    buffer
        The Krylov buffer after the step (after compression), or ``None``.
    step_size
        Fraction of the Newton step taken (``0``: none).
    change
        RMS change of the latent mode.
    objective
        ``Ψ`` at the mode after the step.
    ah
        ``aᵀ h = (f − μ)ᵀ K⁻¹ (f − μ)`` at that mode (recovers ``Σ log p(y | f) = Ψ + ½ aᵀh``).

    Returns
    -------
    NewtonStep
        The record.
    """
    return NewtonStep(
        step=t,
        iterations=inner.iteration,
        products=inner.products,
        buffer_size=0 if buffer is None else buffer.size,
        change=change,
        log_likelihood=objective + 0.5 * ah,
        step_size=step_size,
        objective=objective,
    )


@dataclass(frozen=True)
class LaplaceState:
    """Everything that changes in the Newton loop, after one inner iteration or one step.

    The loop yields one state per inner iteration (``record is None``: the mode is still
    the linearisation point of step ``newton_step``) and one at the end of each Newton
    step, after the step-size search (``record`` set: the mode is the new one, ``A`` and
    ``inner`` are still the step's).

    Attributes
    ----------
    problem
        The fixed data of the fit (likelihood, targets, prior operator, projector).
    newton_step
        Newton step ``t`` (0-based).
    inner
        The inner solver's state on the Newton system ``A``.
    h
        ``P (f − μ)`` at the current mode, shape ``(N,)`` with ``N = C n``
        (``f − μ`` when ``P`` is ``None``).
    weights
        ``a = K⁻¹ (f − μ)`` at the current mode, in range ``P``, shape ``(N,)``: the
        posterior mean is ``μ + k(x, X) a``.
    objective
        The Laplace objective ``Ψ = Σ log p(y | μ + h) − ½ aᵀ h`` at the current mode.
    A
        The Newton system operator ``K + W_t⁻¹`` (``P K P + W_t⁺ + c (I − P)`` for the
        softmax), shape ``(N, N)``.
    buffer
        The Krylov buffer of ``K`` (``P K P`` for the softmax) shared across steps, or
        ``None`` without recycling. It is updated in place by the solver.
    steps
        Records of the Newton steps completed so far (this one included when ``record``
        is set).
    record
        The record of step ``newton_step`` on the state that ends it, else ``None``.
    stop_reason
        Set on the last state of the loop, ``None`` before.
    """

    problem: LaplaceProblem
    newton_step: int
    inner: SolverState
    h: torch.Tensor
    weights: torch.Tensor
    objective: float
    A: LinearOperator
    buffer: KrylovBuffer | None
    steps: tuple[NewtonStep, ...]
    record: NewtonStep | None = None
    stop_reason: NewtonStopReason | None = None

    @property
    def belief(self) -> GaussianSolutionBelief:
        """The inner solver's belief about ``A⁻¹ ŷ_t`` (its mean: the representer weights)."""
        return self.inner.belief

    @property
    def converged(self) -> bool:
        """Whether the loop stopped because it met ``newton_tol``."""
        return self.stop_reason is NewtonStopReason.CONVERGED
