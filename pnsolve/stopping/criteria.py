"""The built-in stopping criteria."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .._core.stop_reason import StopReason
from .._core.validation import check_tensor
from .base import StoppingCriterion

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["MatvecBudget", "MaxIterations", "PosteriorContraction", "ResidualNorm"]


def _count(value: object, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int ≥ {minimum}, got {value!r}")
    return value


def _nonneg(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return float(value)


class MaxIterations(StoppingCriterion):
    """Stop after ``maxiter`` iterations (``StopReason.MAX_ITERATIONS``)."""

    def __init__(self, maxiter: int) -> None:
        self.maxiter = _count(maxiter, "maxiter")

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        return StopReason.MAX_ITERATIONS if state.iteration >= self.maxiter else None

    def __repr__(self) -> str:
        return f"MaxIterations({self.maxiter})"


class ResidualNorm(StoppingCriterion):
    """Stop when ``‖r_i‖ ≤ max(rtol·‖b‖, atol)`` (``StopReason.CONVERGED``).

    The residual is the solver's recursively updated one (no extra product). With
    ``b = 0`` the prior already satisfies it (``StopReason.ZERO_RHS``).
    """

    def __init__(self, rtol: float = 1e-5, atol: float = 0.0) -> None:
        self.rtol = _nonneg(rtol, "rtol")
        self.atol = _nonneg(atol, "atol")

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        if float(state.b_norm) == 0.0:
            return StopReason.ZERO_RHS
        tol = max(self.rtol * float(state.b_norm), self.atol)
        return StopReason.CONVERGED if float(state.residual_norm) <= tol else None

    def __repr__(self) -> str:
        return f"ResidualNorm(rtol={self.rtol}, atol={self.atol})"


class MatvecBudget(StoppingCriterion):
    """Stop once ``budget`` matrix-vector products (columns) were spent (``StopReason.BUDGET``)."""

    def __init__(self, budget: int) -> None:
        self.budget = _count(budget, "budget")

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        return StopReason.BUDGET if state.matvecs >= self.budget else None

    def __repr__(self) -> str:
        return f"MatvecBudget({self.budget})"


class PosteriorContraction(StoppingCriterion):
    """Stop when the belief's variance along a query direction ``u`` is small.

    Stops (``StopReason.CONTRACTION``) when ``uᵀ Σ_i u ≤ max(rtol · uᵀ Σ₀ u, atol)``.
    ``uᵀ Σ₀ u`` is computed once before the first iteration (an inner solve under the
    inverse prior, whose products are not counted in ``state.products``); afterwards
    ``uᵀ Σ_i u = uᵀ Σ₀ u − ‖Vᵀ u‖²`` costs ``O(n i)`` per check.

    Parameters
    ----------
    direction
        ``u``, shape ``(n,)`` (or ``(n, m)``: stop when every column has contracted).
    rtol, atol
        Relative (to the prior variance) and absolute tolerances.
    """

    def __init__(self, direction: torch.Tensor, rtol: float = 1e-3, atol: float = 0.0) -> None:
        check_tensor(direction, "direction")
        if direction.ndim not in (1, 2):
            raise ValueError(f"direction must be (n,) or (n, m), got {tuple(direction.shape)}")
        self.direction = direction
        self.rtol = _nonneg(rtol, "rtol")
        self.atol = _nonneg(atol, "atol")

    def initial_memory(self, state: SolverState) -> torch.Tensor:
        belief = state.belief
        U = belief._directions(self.direction)
        return belief.prior.variance(belief.A, U)

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        prior_var = memory
        remaining = prior_var - state.belief.downdate_variance(
            self.direction if self.direction.ndim == 2 else self.direction.unsqueeze(-1)
        )
        tol = torch.clamp(self.rtol * prior_var, min=self.atol)
        return StopReason.CONTRACTION if bool((remaining <= tol).all()) else None

    def __repr__(self) -> str:
        return f"PosteriorContraction(rtol={self.rtol}, atol={self.atol})"
