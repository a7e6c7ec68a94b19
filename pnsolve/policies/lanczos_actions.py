"""Lanczos actions: an orthonormal basis of a Krylov space, one product per iteration."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .._core import random as rnd
from ..linops.base import LinearOperator
from ..linops.checks import as_operand
from ._common import own_memory, require_generator, zero_action
from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["Lanczos", "LanczosMemory"]

_STARTS = ("residual", "random")


@dataclass(frozen=True, eq=False)
class LanczosMemory:
    """Per-run memory of :class:`Lanczos`.

    Attributes
    ----------
    basis
        The actions so far, orthonormal columns ``Q``, shape ``(n, i)``.
    acted_at
        The iteration at which the policy last produced an action (``-1`` before).
    start
        The start vector ``(n,)`` of a non-adaptive start (drawn or given); ``None``
        for ``start="residual"``.
    """

    basis: torch.Tensor
    acted_at: int = -1
    start: torch.Tensor | None = None


class Lanczos(Policy):
    """Actions ``q_0, q_1, …``: the Lanczos vectors of ``K_i(A, q_0)``.

    ``q_0`` is the normalised start vector; then ``q_i`` is the previous image
    ``A q_{i−1}`` (the solver's ``state.observation``, so no extra product)
    orthogonalised against all previous ``q_j`` (two passes of classical Gram–Schmidt)
    and normalised. The actions are orthonormal in the Euclidean inner product.

    Parameters
    ----------
    start
        ``"residual"`` (default): ``q_0 = r₀ / ‖r₀‖``, the Krylov space of CG; under
        the inverse prior the mean equals the CG iterate in exact arithmetic. The
        actions depend on ``b``: the policy is :attr:`adaptive` and its beliefs are
        not calibrated. ``"random"``: a standard Gaussian start vector drawn from the
        solve's ``generator`` in :meth:`initial_memory` (a generator is required). A
        tensor of shape ``(n,)``: that vector (``A``'s dtype and device, finite,
        nonzero; it must not be built from ``b`` for the calibration claim to hold).
        The last two are non-adaptive (the Krylov space ``K_i(A, q_0)`` depends on
        ``A`` alone), so their beliefs are calibrated; a random start also spreads
        the actions over the extreme eigenvectors of ``A``, a randomized subspace
        iteration at one product per iteration.

    Notes
    -----
    When the new vector vanishes (relative norm ``≤ 10 √n eps``: the Krylov space is
    invariant) the residual start returns a zero action and the solver stops with
    ``StopReason.BREAKDOWN`` (the belief's mean then solves the system). A random start
    restarts from a fresh Gaussian vector orthogonalised against the basis (the mean
    need not solve the system yet); a tensor start stops like the residual start.

    The policy expects to act every iteration. Inside :class:`Mixed` or after a
    :class:`Switch` it restarts whenever the previous action was not its own: from the
    current residual (``start="residual"``) or, for the non-adaptive starts, from the
    newest image ``A s`` in ``state.observation`` (which depends on ``b`` only if
    another, adaptive policy produced ``s``).
    """

    def __init__(self, start: str | torch.Tensor = "residual") -> None:
        if isinstance(start, torch.Tensor):
            if start.ndim != 1 or not start.is_floating_point():
                raise ValueError(
                    f"start must be a floating tensor of shape (n,), got dtype {start.dtype} "
                    f"and shape {tuple(start.shape)}"
                )
            if not bool(torch.isfinite(start).all()) or not bool((start != 0).any()):
                raise ValueError("start must be finite and nonzero")
        elif not isinstance(start, str) or start not in _STARTS:
            raise ValueError(
                f"start must be one of {_STARTS} or a tensor of shape (n,), got {start!r}"
            )
        self.start = start

    @property
    def adaptive(self) -> bool:
        """``True`` for ``start="residual"`` (the Krylov space of ``b``), else ``False``."""
        return isinstance(self.start, str) and self.start == "residual"

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> LanczosMemory:
        """An empty basis ``(n, 0)``; a random start is drawn here, a given one checked."""
        basis = b.new_empty(b.shape[0], 0)
        if isinstance(self.start, torch.Tensor):
            start = as_operand(self.start, A, "start", allow_matrix=False)
            return LanczosMemory(basis, start=start)
        if self.start == "random":
            g = require_generator(generator, self)
            v = rnd.randn(b.shape[0], generator=g, dtype=b.dtype, device=b.device)
            return LanczosMemory(basis, start=v)
        return LanczosMemory(basis)

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, LanczosMemory]:
        """Return ``(q, memory)`` with the unit action ``q`` of shape ``(n,)``."""
        memory = own_memory(self, state, LanczosMemory)
        Q = memory.basis
        obs = state.observation
        own = state.iteration == memory.acted_at + 1
        if memory.start is None:  # residual start
            v = obs[:, 0] if obs is not None and own else state.residual
        elif Q.shape[1] == 0 or obs is None:
            v = memory.start
        else:  # own image, or (after another policy) the newest image: never the residual
            v = obs[:, 0]
        q = _orthonormalised(v, Q)
        if q is None and self.start == "random" and Q.shape[1] < Q.shape[0]:
            g = require_generator(generator, self)  # invariant subspace: a fresh random start
            w = rnd.randn(Q.shape[0], generator=g, dtype=Q.dtype, device=Q.device)
            q = _orthonormalised(w, Q)
        if q is None:
            return zero_action(state.residual), memory
        basis = torch.cat([Q, q.unsqueeze(-1)], dim=1)
        return q, LanczosMemory(basis, state.iteration, memory.start)

    def __repr__(self) -> str:
        if isinstance(self.start, torch.Tensor):
            return f"Lanczos(start=<tensor {tuple(self.start.shape)}>)"
        return "Lanczos()" if self.start == "residual" else f"Lanczos(start={self.start!r})"


def _orthonormalised(v: torch.Tensor, Q: torch.Tensor) -> torch.Tensor | None:
    """``v`` orthogonalised against ``Q`` and normalised; ``None`` if nothing is left."""
    size = torch.linalg.vector_norm(v)
    for _ in range(2):  # "twice is enough"
        v = v - Q @ (Q.mT @ v)
    norm = torch.linalg.vector_norm(v)
    eps = torch.finfo(v.dtype).eps
    if not float(norm) > 10.0 * math.sqrt(v.shape[0]) * eps * float(size):
        return None
    return v / norm
