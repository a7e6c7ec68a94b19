"""Composite policies: switch between policies by iteration, or mix them at random."""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from ..linops.base import LinearOperator
from ._common import require_generator
from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["Mixed", "Switch"]


class _Composite(Policy):
    """Sub-policies with one memory slot each: the composite memory is a tuple."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        if isinstance(policies, Policy) or not isinstance(policies, Sequence):
            raise TypeError(
                f"policies must be a sequence of Policy objects, got {type(policies).__name__}"
            )
        for i, p in enumerate(policies):
            if not isinstance(p, Policy):
                raise TypeError(f"policies[{i}] must be a Policy, got {type(p).__name__}")
        if not policies:
            raise ValueError("policies must not be empty")
        self.policies: tuple[Policy, ...] = tuple(policies)

    @property
    def adaptive(self) -> bool:
        """``True`` if any sub-policy is adaptive."""
        return any(p.adaptive for p in self.policies)

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> tuple[object, ...]:
        """Every sub-policy's initial memory, in order."""
        return tuple(p.initial_memory(A, b, generator) for p in self.policies)

    def _delegate(
        self, j: int, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, tuple[object, ...]]:
        """Let ``policies[j]`` act on its own memory; the others' memories stay unchanged."""
        memories = state.policy_memory
        if not isinstance(memories, tuple) or len(memories) != len(self.policies):
            raise TypeError(
                f"{type(self).__name__} expects a tuple of {len(self.policies)} memories in "
                f"state.policy_memory, got {type(memories).__name__}"
            )
        sub = dataclasses.replace(state, policy_memory=memories[j])
        S, memory = self.policies[j](sub, generator)
        return S, (*memories[:j], memory, *memories[j + 1 :])


class Switch(_Composite):
    """Use ``policies[j]`` from iteration ``at[j−1]`` on (``policies[0]`` before ``at[0]``).

    Each sub-policy keeps its own memory, initialised at the start of the solve, and
    sees ``state.iteration`` of the whole solve.

    Parameters
    ----------
    policies
        ``k ≥ 1`` policies.
    at
        ``k − 1`` strictly increasing positive iteration numbers (0-based: iteration
        ``i`` produces the ``(i+1)``-th action).

    Examples
    --------
    Five random unit vectors, then CG:

    >>> import pnsolve as pn
    >>> policy = pn.policies.Switch([pn.policies.UnitVector("random"), pn.policies.CG()], at=[5])
    """

    def __init__(self, policies: Sequence[Policy], at: Sequence[int]) -> None:
        super().__init__(policies)
        if not isinstance(at, Sequence) or isinstance(at, str):
            raise TypeError(f"at must be a sequence of ints, got {type(at).__name__}")
        if len(at) != len(self.policies) - 1:
            raise ValueError(
                f"at must have len(policies) - 1 = {len(self.policies) - 1} entries, got {len(at)}"
            )
        for i, a in enumerate(at):
            if isinstance(a, bool) or not isinstance(a, int) or a < 1:
                raise ValueError(f"at[{i}] must be a positive int, got {a!r}")
            if i and a <= at[i - 1]:
                raise ValueError(f"at must be strictly increasing, got {list(at)}")
        self.at: tuple[int, ...] = tuple(at)

    def active(self, iteration: int) -> int:
        """Index of the policy that acts at ``iteration``."""
        return bisect.bisect_right(self.at, iteration)

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, tuple[object, ...]]:
        """The active policy's actions and the updated memory tuple."""
        return self._delegate(self.active(state.iteration), state, generator)

    def __repr__(self) -> str:
        return f"Switch(policies={list(self.policies)!r}, at={list(self.at)!r})"


class Mixed(_Composite):
    """Each iteration one policy acts, drawn with probability ``∝ weights``.

    The choice is drawn from the solve's ``generator`` (required). The chosen
    policy acts on its own memory; the memories of the others stay unchanged.

    Parameters
    ----------
    policies
        ``k ≥ 1`` policies.
    weights
        ``k`` non-negative finite numbers with a positive sum (default: equal).
    """

    def __init__(self, policies: Sequence[Policy], weights: Sequence[float] | None = None) -> None:
        super().__init__(policies)
        k = len(self.policies)
        weights = (1.0,) * k if weights is None else weights
        if not isinstance(weights, Sequence) or isinstance(weights, str):
            raise TypeError(f"weights must be a sequence of numbers, got {type(weights).__name__}")
        if len(weights) != k:
            raise ValueError(f"weights must have {k} entries (one per policy), got {len(weights)}")
        for i, w in enumerate(weights):
            if isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w < math.inf:
                raise ValueError(f"weights[{i}] must be a non-negative finite number, got {w!r}")
        if not sum(weights) > 0:
            raise ValueError(f"weights must have a positive sum, got {list(weights)}")
        self.weights: tuple[float, ...] = tuple(float(w) for w in weights)

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> tuple[object, ...]:
        """Every sub-policy's initial memory; fails early without a generator."""
        require_generator(generator, self)
        return super().initial_memory(A, b, generator)

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, tuple[object, ...]]:
        """Draw a policy, let it act; return its actions and the updated memory tuple."""
        g = require_generator(generator, self)
        # drawn on the generator's device (pnsolve._core.random's convention); a host int
        w = torch.tensor(self.weights, dtype=torch.float64, device=g.device)
        j = int(torch.multinomial(w, 1, generator=g))
        return self._delegate(j, state, generator)

    def __repr__(self) -> str:
        return f"Mixed(policies={list(self.policies)!r}, weights={list(self.weights)!r})"
