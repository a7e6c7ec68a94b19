"""The policy protocol: which direction(s) to observe next."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

import torch

from ..linops.base import LinearOperator

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["Policy"]


class Policy(abc.ABC):
    """Maps the read-only solver state to the next action(s).

    Policies are immutable configuration. A policy that needs memory across
    iterations returns it from :meth:`initial_memory` and from each call; the solver
    stores it in ``state.policy_memory`` (its typed slot) and hands it back.

    Subclasses implement :meth:`__call__`.
    """

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> object:
        """The policy's memory before the first iteration (default ``None``)."""
        return None

    @abc.abstractmethod
    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, object]:
        """Return ``(actions, memory)``.

        Parameters
        ----------
        state
            The current, read-only state (``state.policy_memory`` holds this policy's memory).
        generator
            The solve's random generator (``None`` if none was given).

        Returns
        -------
        actions : torch.Tensor
            One action ``(n,)`` or a block ``(n, m)``.
        memory : object
            The policy's memory for the next iteration.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
