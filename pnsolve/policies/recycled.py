"""Replay the actions of a Krylov buffer as a policy (each one costs a product)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch

from ..linops.base import LinearOperator
from .base import Policy

if TYPE_CHECKING:
    from ..krylov.buffer import KrylovBuffer
    from ..solvers.state import SolverState

__all__ = ["Recycled", "RecycledMemory"]


@dataclass(frozen=True)
class RecycledMemory:
    """The buffered actions captured at the start of the solve and the next column."""

    actions: torch.Tensor
    next: int


class Recycled(Policy):
    """Act along a buffer's actions in order, ``block_size`` columns per iteration.

    Unlike passing the buffer as ``buffer=`` to the solver (a product-free *virtual
    run*), this observes each recycled action with a real product: useful when the
    buffer's images do not apply (a different operator) or to study recycled actions
    one at a time. The actions are captured when the solve starts, so a buffer that
    grows during the same solve does not feed itself.

    Parameters
    ----------
    buffer
        A :class:`~pnsolve.krylov.KrylovBuffer` (or any object with an ``actions``
        tensor of shape ``(n, m)``).
    block_size
        Columns per iteration (``≥ 1``).
    adaptive
        Whether the buffered actions may depend on ``b`` (default ``True``: a buffer
        filled by earlier solves, e.g. CG or the Newton steps of IterNCGP, usually
        does). Pass ``False`` only for a buffer built from ``A`` and ``b``-independent
        data alone; the solver then marks its beliefs ``calibrated``.

    Raises
    ------
    RuntimeError
        When called after the buffered actions are used up: stop the solver with
        ``MaxIterations(ceil(m / block_size))`` or compose with
        :class:`~pnsolve.policies.Switch` to continue with another policy.
    """

    def __init__(self, buffer: KrylovBuffer, block_size: int = 1, *, adaptive: bool = True) -> None:
        if not isinstance(getattr(buffer, "actions", None), torch.Tensor):
            raise TypeError(f"buffer must have an `actions` tensor, got {type(buffer).__name__}")
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {block_size!r}")
        if not isinstance(adaptive, bool):
            raise TypeError(f"adaptive must be a bool, got {adaptive!r}")
        self.buffer = buffer
        self.block_size = block_size
        self._adaptive = adaptive

    @property
    def adaptive(self) -> bool:
        """As given (default ``True``: the buffer's provenance is unknown)."""
        return self._adaptive

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> RecycledMemory:
        """The buffered actions captured when the solve starts (copied), and column 0."""
        S = self.buffer.actions
        if S.ndim != 2 or S.shape[0] != A.shape[0]:
            raise ValueError(
                f"buffer.actions must have shape ({A.shape[0]}, m), got {tuple(S.shape)}"
            )
        return RecycledMemory(actions=S.clone(), next=0)

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, RecycledMemory]:
        """The next ``block_size`` buffered actions."""
        # the solver keeps the RecycledMemory this policy returned
        memory = cast(RecycledMemory, state.policy_memory)
        m = memory.actions.shape[1]
        if memory.next >= m:
            raise RuntimeError(
                f"Recycled: all {m} buffered actions are used (iteration {state.iteration}); "
                "stop the solver earlier or Switch to another policy"
            )
        stop = min(m, memory.next + self.block_size)
        S = memory.actions[:, memory.next : stop]
        return (S[:, 0] if S.shape[1] == 1 else S), RecycledMemory(memory.actions, stop)

    def __repr__(self) -> str:
        return (
            f"Recycled(size={self.buffer.actions.shape[1]}, block_size={self.block_size}, "
            f"adaptive={self._adaptive})"
        )
