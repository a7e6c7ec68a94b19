"""Private helpers shared by the built-in policies: argument checks, memory, zero actions.

Random actions are drawn through :mod:`pnsolve._core.random`: on the generator's device,
then moved to the device of ``A`` and ``b``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import torch

from .._core.validation import require_generator as _require_generator

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["check_block_size", "own_memory", "require_generator", "zero_action"]

_Memory = TypeVar("_Memory")


def check_block_size(block_size: object, name: str = "block_size") -> int:
    """Require a positive int (bools rejected); the error names ``name``."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"{name} must be a positive int, got {block_size!r}")
    return block_size


def require_generator(generator: object, policy: object) -> torch.Generator:
    """Require a ``torch.Generator`` for a stochastic policy.

    Raises
    ------
    ValueError
        If ``generator`` is ``None``: the message tells the user to pass ``generator=``.
    TypeError
        If ``generator`` is not a ``torch.Generator``.
    """
    if generator is None:
        raise ValueError(
            f"{policy!r} draws random actions and needs a generator: pass "
            "generator=torch.Generator().manual_seed(...) to the call that runs the "
            "solver: fit(X, y, generator=...) of a GP model, or solve(...) / iterate(...)"
        )
    return _require_generator(generator)


def zero_action(like: torch.Tensor) -> torch.Tensor:
    """A zero action ``(n, 1)`` with ``like``'s dtype and device: the solver records breakdown.

    Policies return it once they have nothing new to observe.
    """
    return like.new_zeros(like.shape[0], 1)


def own_memory(policy: object, state: SolverState, kind: type[_Memory]) -> _Memory:
    """``state.policy_memory``, which must be the policy's own memory, of type ``kind``."""
    memory = state.policy_memory
    if not isinstance(memory, kind):
        raise TypeError(
            f"{policy!r} expects its {kind.__name__} in state.policy_memory, got "
            f"{type(memory).__name__}"
        )
    return memory
