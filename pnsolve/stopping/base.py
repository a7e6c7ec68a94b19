"""Stopping criteria and their composition with ``|``, ``&`` and ``~``."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, cast

from .._core.deprecation import renamed_attributes
from .._core.stop_reason import StopReason

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["AllOf", "AnyOf", "Not", "StoppingCriterion"]


class StoppingCriterion(abc.ABC):
    """Decides after each iteration whether to stop, and why.

    Criteria are immutable configuration. One that needs precomputed quantities
    returns them from :meth:`initial_memory`; the solver keeps them in
    ``state.stopping_memory``. Compose criteria with ``a | b`` (stop when either
    fires: :class:`AnyOf`), ``a & b`` (when both fire: :class:`AllOf`) and ``~a`` (when
    ``a`` does not fire: :class:`Not`).
    """

    def initial_memory(self, state: SolverState) -> object:
        """Memory computed once from the prior state (default ``None``)."""
        return None

    @abc.abstractmethod
    def check(self, state: SolverState, memory: object) -> StopReason | None:
        """The reason to stop at ``state``, or ``None`` to go on."""

    def __call__(self, state: SolverState) -> StopReason | None:
        """``check(state, state.stopping_memory)``."""
        return self.check(state, state.stopping_memory)

    def __or__(self, other: StoppingCriterion) -> StoppingCriterion:
        return AnyOf(self, other)

    def __and__(self, other: StoppingCriterion) -> StoppingCriterion:
        return AllOf(self, other)

    def __invert__(self) -> StoppingCriterion:
        return Not(self)


class _Composite(StoppingCriterion):
    def __init__(self, *criteria: StoppingCriterion) -> None:
        flat: list[StoppingCriterion] = []
        for c in criteria:
            if not isinstance(c, StoppingCriterion):
                raise TypeError(
                    f"{type(self).__name__} composes StoppingCriterion objects, got "
                    f"{type(c).__name__}"
                )
            flat.extend(c.criteria if type(c) is type(self) else (c,))
        self.criteria: tuple[StoppingCriterion, ...] = tuple(flat)

    def initial_memory(self, state: SolverState) -> object:
        """The tuple of the composed criteria's memories, in their order."""
        return tuple(c.initial_memory(state) for c in self.criteria)

    def __repr__(self) -> str:
        op = " | " if isinstance(self, AnyOf) else " & "
        return "(" + op.join(repr(c) for c in self.criteria) + ")"


#: Reasons that say the computation reached its goal; they win over limits when several
#: criteria fire at the same iteration.
_SUCCESS = (StopReason.CONVERGED, StopReason.ZERO_RHS, StopReason.CONTRACTION)


class AnyOf(_Composite):
    """Stops when any criterion fires.

    The recorded reason is the first success reason among those that fired
    (``CONVERGED``, ``ZERO_RHS``, ``CONTRACTION``), else the first reason: so
    ``MaxIterations(50) | ResidualNorm(rtol=1e-6)`` reports ``CONVERGED`` when the
    tolerance is met exactly at iteration 50.
    """

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        """See :meth:`StoppingCriterion.check`.

        ``memory`` is the tuple of the criteria's memories; returns the first success
        reason among the criteria that fired, else the first reason, else ``None``.
        """
        # memory is the tuple built by _Composite.initial_memory
        memories = cast(tuple[object, ...], memory)
        fired = [r for c, m in zip(self.criteria, memories) if (r := c.check(state, m)) is not None]
        if not fired:
            return None
        return next((r for r in fired if r in _SUCCESS), fired[0])


class AllOf(_Composite):
    """Stops when every criterion fires; the first one's reason is recorded."""

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        """See :meth:`StoppingCriterion.check`.

        ``memory`` is the tuple of the criteria's memories; returns the first criterion's
        reason if every criterion fired, else ``None``.
        """
        # memory is the tuple built by _Composite.initial_memory
        memories = cast(tuple[object, ...], memory)
        reasons = [c.check(state, m) for c, m in zip(self.criteria, memories)]
        return reasons[0] if all(r is not None for r in reasons) else None


class Not(StoppingCriterion):
    """Stops when the wrapped criterion does *not* fire (reason ``CRITERION``)."""

    def __init__(self, criterion: StoppingCriterion) -> None:
        if not isinstance(criterion, StoppingCriterion):
            raise TypeError(f"Not wraps a StoppingCriterion, got {type(criterion).__name__}")
        self.criterion = criterion

    def initial_memory(self, state: SolverState) -> object:
        """The wrapped criterion's memory."""
        return self.criterion.initial_memory(state)

    def check(self, state: SolverState, memory: object) -> StopReason | None:
        """See :meth:`StoppingCriterion.check`; ``CRITERION`` when the wrapped one does not fire."""
        return StopReason.CRITERION if self.criterion.check(state, memory) is None else None

    def __repr__(self) -> str:
        return f"~{self.criterion!r}"


#: ``Any``/``All`` (renamed: ``Any`` shadowed ``typing.Any`` wherever both were imported).
__getattr__ = renamed_attributes(__name__, {"Any": "AnyOf", "All": "AllOf"})
