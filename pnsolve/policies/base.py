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

    Subclasses implement :meth:`__call__` and say whether they are :attr:`adaptive`.
    """

    @property
    def adaptive(self) -> bool:
        """Whether the actions may depend on the right-hand side ``b``.

        An adaptive policy reads ``b`` through the residual, the mean or a buffer of
        earlier solves. A **non-adaptive** policy builds its actions from ``A``, fixed
        data and the solve's generator only. Conditioning on such actions is exact
        Gaussian inference, so its beliefs are calibrated on solutions drawn from the
        prior (see the Calibration page of the docs): the solver marks them ``belief.calibrated``.
        Adaptive actions (CG's residuals) make the belief's covariance a heuristic,
        not an error bar.

        The base class answers ``True`` (the safe claim for a policy that says nothing);
        built-ins override it.
        """
        return True

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
