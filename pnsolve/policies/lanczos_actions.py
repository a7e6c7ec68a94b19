"""Lanczos actions: an orthonormal basis of the Krylov space, one product per iteration."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..linops.base import LinearOperator
from ._common import own_memory, zero_action
from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["Lanczos", "LanczosMemory"]


@dataclass(frozen=True, eq=False)
class LanczosMemory:
    """Per-run memory of :class:`Lanczos`.

    Attributes
    ----------
    basis
        The actions so far, orthonormal columns ``Q``, shape ``(n, i)``.
    acted_at
        The iteration at which the policy last produced an action (``-1`` before).
    """

    basis: torch.Tensor
    acted_at: int = -1


class Lanczos(Policy):
    """Actions ``q_0, q_1, …``: the Lanczos vectors of ``K_i(A, r₀)``.

    ``q_0 = r₀ / ‖r₀‖``; then ``q_i`` is the previous image ``A q_{i−1}`` (the solver's
    ``state.observation``, so no extra product) orthogonalised against all previous
    ``q_j`` (two passes of classical Gram–Schmidt) and normalised. Under the inverse
    prior the mean equals the CG iterate in exact arithmetic; unlike CG the actions
    are orthonormal in the Euclidean inner product.

    When the new vector vanishes (relative norm ``≤ 10 √n eps``: the Krylov space is
    invariant, so the belief's mean already solves the system) the policy returns a
    zero action and the solver stops with ``StopReason.BREAKDOWN``.

    Notes
    -----
    The policy expects to act every iteration. Inside :class:`Mixed` or after a
    :class:`Switch` it restarts from the current residual (orthogonalised against its
    basis) whenever the previous action was not its own.
    """

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> LanczosMemory:
        """An empty basis ``(n, 0)`` with ``b``'s dtype and device."""
        return LanczosMemory(b.new_empty(b.shape[0], 0))

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, LanczosMemory]:
        """Return ``(q, memory)`` with the unit action ``q`` of shape ``(n,)``."""
        memory = own_memory(self, state, LanczosMemory)
        Q = memory.basis
        obs = state.observation
        own = state.iteration == memory.acted_at + 1
        v = obs[:, 0] if obs is not None and own else state.residual
        size = torch.linalg.vector_norm(v)
        for _ in range(2):  # "twice is enough"
            v = v - Q @ (Q.mT @ v)
        norm = torch.linalg.vector_norm(v)
        eps = torch.finfo(v.dtype).eps
        if not float(norm) > 10.0 * math.sqrt(v.shape[0]) * eps * float(size):
            return zero_action(state.residual), memory
        q = v / norm
        return q, LanczosMemory(torch.cat([Q, q.unsqueeze(-1)], dim=1), state.iteration)

    def __repr__(self) -> str:
        return "Lanczos()"
