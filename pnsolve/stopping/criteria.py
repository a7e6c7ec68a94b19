"""The built-in stopping criteria."""

from __future__ import annotations

import abc
import math
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol, cast

import torch

from .._core.stop_reason import StopReason
from .._core.validation import check_tensor
from .base import StoppingCriterion

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["EpochBudget", "MatvecBudget", "MaxIterations", "PosteriorContraction", "ResidualNorm"]


class _CountsEntries(Protocol):
    """An operator that charges its kernel-entry accesses (e.g. ``KernelSystem``)."""

    @property
    def entries(self) -> int: ...


def _count(value: object, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int ≥ {minimum}, got {value!r}")
    return value


def _nonneg(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return float(value)


class _CountLimit(StoppingCriterion):
    """Stop once a counter of the state reaches a limit (the subclass names both)."""

    #: name of the constructor argument and attribute holding the limit
    _limit_name: str
    #: the stop reason reported
    _reason: StopReason

    def __init__(self, limit: int) -> None:
        setattr(self, self._limit_name, _count(limit, self._limit_name))

    @abc.abstractmethod
    def _counter(self, state: SolverState) -> int:
        """The counter compared with the limit (iterations, products, ...)."""

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        """See :meth:`StoppingCriterion.check`; the reason once the counter reaches the limit."""
        return self._reason if self._counter(state) >= getattr(self, self._limit_name) else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self, self._limit_name)})"


class MaxIterations(_CountLimit):
    """Stop after ``maxiter`` iterations (``StopReason.MAX_ITERATIONS``)."""

    _limit_name = "maxiter"
    _reason = StopReason.MAX_ITERATIONS
    maxiter: int

    def __init__(self, maxiter: int) -> None:
        super().__init__(maxiter)

    def _counter(self, state: SolverState) -> int:
        return state.iteration


class ResidualNorm(StoppingCriterion):
    """Stop when ``‖r_i‖ ≤ max(rtol·‖b‖, atol)`` (``StopReason.CONVERGED``).

    The residual is the solver's recursively updated one (no extra product). With
    ``b = 0`` the prior already satisfies it (``StopReason.ZERO_RHS``).
    """

    def __init__(self, rtol: float = 1e-5, atol: float = 0.0) -> None:
        self.rtol = _nonneg(rtol, "rtol")
        self.atol = _nonneg(atol, "atol")

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        """See :meth:`StoppingCriterion.check`; ``ZERO_RHS`` if ``b = 0``, ``CONVERGED`` if met."""
        residual_norm, b_norm = state.host_norms()
        if b_norm == 0.0:
            return StopReason.ZERO_RHS
        tol = max(self.rtol * b_norm, self.atol)
        return StopReason.CONVERGED if residual_norm <= tol else None

    def __repr__(self) -> str:
        return f"ResidualNorm(rtol={self.rtol}, atol={self.atol})"


class MatvecBudget(_CountLimit):
    """Stop once ``budget`` matrix-vector products (columns) were spent (``StopReason.BUDGET``)."""

    _limit_name = "budget"
    _reason = StopReason.BUDGET
    budget: int

    def __init__(self, budget: int) -> None:
        super().__init__(budget)

    def _counter(self, state: SolverState) -> int:
        return state.matvecs


class EpochBudget(StoppingCriterion):
    """Stop once ``budget`` epochs of kernel entries were spent (``StopReason.BUDGET``).

    An *epoch* is the cost of evaluating every entry of an ``n × n`` kernel matrix once,
    ``n²`` kernel entries: the cost measure of GP hyperparameter training (Lin et al.,
    2024). The criterion reads the count of an operator that charges its accesses, such
    as :class:`pnsolve.iterative.KernelSystem` (one product ``K̂ V`` is one epoch,
    whatever the number of columns; a row block of ``b`` rows is ``b/n`` epochs): it
    needs ``state.A.entries``, the kernel entries charged so far (an int).

    The count starts when the solve starts (:meth:`initial_memory`, at the prior
    state): the residual of a warm start ``x0``, computed before, is not charged to the
    budget, as in the kernel-system solvers, whose budgets cap the iterations. The
    criterion fires once the epochs spent since then *reach* the budget (``≥``, like
    :class:`MatvecBudget`), checked after every iteration: with one product per
    iteration an integer budget ``T`` allows exactly ``T`` iterations; a fractional one
    may be overshot by less than one iteration's cost. Compose it like any criterion,
    e.g. ``EpochBudget(10) | ResidualNorm(rtol=1e-2)``.

    Parameters
    ----------
    budget
        Epochs, a finite number ``≥ 0`` (``0`` stops before the first iteration).

    Raises
    ------
    ValueError
        If ``budget`` is negative, not finite or not a number.
    TypeError
        From :meth:`initial_memory`, if the solve's operator does not count kernel
        entries.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.rand(40, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    >>> system = pn.iterative.KernelSystem(pn.kernels.RBF(lengthscale=0.5), X, 0.1)
    >>> solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.EpochBudget(3))
    >>> belief, info = solver.solve(system, torch.ones(40, dtype=torch.float64))
    >>> info.iterations, info.stop_reason.name, system.products
    (3, 'BUDGET', 3)
    """

    def __init__(self, budget: float) -> None:
        self.budget = _nonneg(budget, "budget")
        if not math.isfinite(self.budget):
            raise ValueError(f"budget must be finite, got {budget!r}")

    def initial_memory(self, state: SolverState) -> tuple[int, int]:
        """``(entries at the start, n²)`` of the solve's operator."""
        entries = getattr(state.A, "entries", None)
        if isinstance(entries, bool) or not isinstance(entries, int):
            raise TypeError(
                "EpochBudget needs an operator that counts its kernel entries (an int "
                "attribute `entries`), such as pnsolve.iterative.KernelSystem; got "
                f"{type(state.A).__name__}"
            )
        n = state.A.shape[0]
        return entries, n * n

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        """See :meth:`StoppingCriterion.check`; ``BUDGET`` once ``budget`` epochs were spent.

        ``memory`` is the pair returned by :meth:`initial_memory`.
        """
        # initial_memory returned this pair after checking that A counts its entries
        start, n2 = cast(tuple[int, int], memory)
        A = cast(_CountsEntries, state.A)
        spent = Fraction(A.entries - start, n2)
        return StopReason.BUDGET if spent >= Fraction(self.budget) else None

    def __repr__(self) -> str:
        return f"EpochBudget({self.budget:g})"


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
        """The prior variances ``uᵀ Σ₀ u``, shape ``(m,)`` (``m = 1`` for a vector ``u``)."""
        belief = state.belief
        U = belief._directions(self.direction)
        return belief.prior.variance(belief.A, U)

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        """See :meth:`StoppingCriterion.check`; ``CONTRACTION`` once every column contracted.

        ``memory`` holds the prior variances from :meth:`initial_memory`.
        """
        prior_var = cast(torch.Tensor, memory)  # returned by initial_memory
        remaining = prior_var - state.belief.downdate_variance(
            self.direction if self.direction.ndim == 2 else self.direction.unsqueeze(-1)
        )
        tol = torch.clamp(self.rtol * prior_var, min=self.atol)
        return StopReason.CONTRACTION if bool((remaining <= tol).all()) else None

    def __repr__(self) -> str:
        return f"PosteriorContraction(rtol={self.rtol}, atol={self.atol})"
