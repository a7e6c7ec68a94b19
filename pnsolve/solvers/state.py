"""The typed, frozen records of a probabilistic linear solve."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from .._core.info import IterationInfo
from .._core.stop_reason import StopReason
from ..beliefs.gaussian_solution import GaussianSolutionBelief
from ..linops.base import LinearOperator

__all__ = ["SolveInfo", "SolverState"]


@dataclass(frozen=True, eq=False)
class SolverState:
    """Everything that changes during a solve, after ``iteration`` belief updates.

    Only the solver loop creates states; policies and stopping criteria read them.

    Attributes
    ----------
    iteration
        Number of completed iterations (0 for the prior).
    belief
        The belief about ``x`` after this iteration.
    residual
        ``r_i = b − A x_i`` (kept recursively, no extra product), shape ``(n,)``.
    residual_norm
        ``‖r_i‖``, 0-d tensor.
    b_norm
        ``‖b‖``, 0-d tensor.
    products
        Products with ``A`` so far (one per iteration under the inverse prior, plus one
        for ``r₀`` when ``x0`` is given).
    matvecs
        Columns multiplied by ``A`` so far (block actions count their columns).
    action
        The last action block ``S``, shape ``(n, m)``; ``None`` for the prior.
    observation
        Its image ``A S``, shape ``(n, m)``; ``None`` for the prior.
    policy_memory
        The policy's own typed slot (whatever its ``initial_memory`` / call returned).
    stopping_memory
        The stopping criterion's slot (e.g. prior variances for posterior contraction).
    preconditioner
        The solver's preconditioner (read by the CG policy), or ``None``.
    stop_reason
        Set on the last state of a run, ``None`` before.
    residual_norm_value, b_norm_value
        ``‖r_i‖`` and ``‖b‖`` as Python floats when the loop has read them on the host
        already (off the CPU, with the iteration's one synchronisation), else ``None``;
        stopping criteria use them instead of reading the tensors again.
    """

    iteration: int
    belief: GaussianSolutionBelief
    residual: torch.Tensor
    residual_norm: torch.Tensor
    b_norm: torch.Tensor
    products: int
    matvecs: int
    action: torch.Tensor | None = None
    observation: torch.Tensor | None = None
    policy_memory: object = None
    stopping_memory: object = None
    preconditioner: LinearOperator | None = None
    stop_reason: StopReason | None = None
    residual_norm_value: float | None = None
    b_norm_value: float | None = None

    def host_norms(self) -> tuple[float, float]:
        """``(‖r_i‖, ‖b‖)`` as floats: the host copies when read already, else read now."""
        rn = self.residual_norm_value
        bn = self.b_norm_value
        return (
            float(self.residual_norm) if rn is None else rn,
            float(self.b_norm) if bn is None else bn,
        )

    @property
    def A(self) -> LinearOperator:
        """The system operator."""
        return self.belief.A

    @property
    def b(self) -> torch.Tensor:
        """The right-hand side."""
        return self.belief.b

    @property
    def relative_residual_norm(self) -> torch.Tensor:
        """``‖r_i‖ / ‖b‖`` (``‖r_i‖`` when ``b = 0``)."""
        b_norm = float(self.b_norm) if self.b_norm_value is None else self.b_norm_value
        return self.residual_norm / self.b_norm if b_norm > 0 else self.residual_norm


@dataclass(frozen=True, eq=False, kw_only=True)
class SolveInfo(IterationInfo):
    """Summary of a finished probabilistic solve.

    Attributes
    ----------
    iterations
        Belief updates performed.
    products, matvecs
        Products (calls) with ``A`` and columns multiplied.
    stop_reason
        Why the solver stopped.
    residual_norms
        ``‖r_i‖`` for ``i = 0, …, iterations``, shape ``(iterations + 1,)``.
    rank
        Rank of ``C_i`` (directions kept; dependent ones are dropped).
    """

    matvecs: int
    rank: int

    @property
    def converged(self) -> bool:
        """Whether the run stopped because the residual met its tolerance (= ``success``)."""
        return self.success

    @classmethod
    def from_states(cls, states: Iterable[SolverState]) -> SolveInfo:
        """The summary of a run from its states (iteration 0 first, the stopping one last).

        Consumes ``states`` (e.g. ``solver.iterate(A, b)``) keeping only the residual
        norms and the last state, so memory stays ``O(iterations)``.
        """
        norms: list[torch.Tensor] = []
        last: SolverState | None = None
        for last in states:
            if last.iteration == len(norms):  # a breakdown repeats the last iteration
                norms.append(last.residual_norm)
        if last is None:
            raise ValueError("states is empty: a run yields at least its prior state")
        return cls.from_history(last, norms)

    @classmethod
    def from_history(cls, last: SolverState, residual_norms: Sequence[torch.Tensor]) -> SolveInfo:
        """The summary from the stopping state and the residual norms of every state.

        Parameters
        ----------
        last
            The state the run ended on (with its ``stop_reason``).
        residual_norms
            ``‖r_i‖`` of iterations ``0, …, last.iteration`` (0-d tensors).
        """
        if last.stop_reason is None:
            raise ValueError("the last state has no stop_reason: the run is not finished")
        if len(residual_norms) != last.iteration + 1:
            raise ValueError(
                f"residual_norms has {len(residual_norms)} entries for "
                f"{last.iteration} iterations (expected {last.iteration + 1})"
            )
        return cls(
            iterations=last.iteration,
            products=last.products,
            matvecs=last.matvecs,
            stop_reason=last.stop_reason,
            residual_norms=torch.stack(list(residual_norms)),
            rank=last.belief.rank,
        )
