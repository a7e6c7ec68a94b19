"""Unit-vector actions: observe single entries of the residual (partial Cholesky)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .._core import random as rnd
from .._core.errors import MissingStructureError
from ..linops.base import LinearOperator
from ._common import check_block_size, own_memory, require_generator, zero_action
from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["UnitVector", "UnitVectorMemory"]

_ORDERS = ("sequential", "random", "pivot", "schur")


@dataclass(frozen=True, eq=False)
class UnitVectorMemory:
    """Per-run memory of :class:`UnitVector`.

    Attributes
    ----------
    chosen
        Indices observed so far, in order, shape ``(i,)`` (``int64``, on ``A``'s device).
    permutation
        The random order drawn at the start, shape ``(n,)``; ``None`` unless
        ``order="random"``.
    schur
        For ``order="schur"``: the diagonal of the Schur complement ``A − A C_i A``
        after the ``seen`` directions of the belief, shape ``(n,)``; ``None`` otherwise.
    seen
        For ``order="schur"``: how many of the belief's directions :attr:`schur`
        already accounts for.
    """

    chosen: torch.Tensor
    permutation: torch.Tensor | None = None
    schur: torch.Tensor | None = None
    seen: int = 0


class UnitVector(Policy):
    """Actions ``e_j``: each iteration observes ``block_size`` new coordinates.

    With the inverse prior and ``x0 = 0``, after observing the index set ``I`` the
    mean is the subset-of-data / partial-Cholesky solution ``x_I = A_II⁻¹ b_I`` (zero
    elsewhere) and ``C_i`` is ``A_II⁻¹`` padded with zeros. Every index is used once;
    once all ``n`` are used the policy returns a zero action and the solver stops
    with ``StopReason.BREAKDOWN`` (the belief is exact by then).

    Parameters
    ----------
    order
        ``"sequential"`` (``0, 1, 2, …``), ``"random"`` (a permutation drawn once from
        the solve's ``generator``), ``"pivot"`` (greedy: the unused indices with
        the largest ``|r_i|``) or ``"schur"`` (greedy pivoted Cholesky: the unused
        indices with the largest diagonal of the Schur complement ``A − A C_i A``).
    block_size
        Coordinates per iteration; actions have shape ``(n, block_size)`` (fewer
        columns for the last block when ``n`` is not divisible). For ``"schur"`` a
        block takes the ``block_size`` largest entries of the current diagonal (the
        pivots inside a block are not updated against each other).

    Notes
    -----
    ``"sequential"``, ``"random"`` and ``"schur"`` are non-adaptive (the indices
    depend on ``A`` and the generator, never on ``b``): their beliefs are calibrated.
    ``"pivot"`` reads the residual and is :attr:`adaptive`.

    ``"schur"`` is the pivot rule of the greedy pivoted Cholesky factorisation
    (the preconditioner :class:`~pnsolve.preconditioners.PivotedCholesky`): with the
    inverse prior ``C_i = V Vᵀ`` and the stored images ``W = A V``, so
    ``diag(A − A C_i A) = diag(A) − rowsum(W ∘ W)``. It needs ``A``'s structured
    diagonal once (read in :meth:`initial_memory`) and ``O(n)`` work per new
    direction, no product with ``A`` beyond the solver's one. For a kernel system
    ``K + σ² I`` it picks the training point whose kernel column the observed
    ones explain worst, as greedy inducing-point selection does. Only under the
    inverse prior (a ``ValueError`` says so otherwise).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> b = torch.tensor([1.0, 2.0], dtype=torch.float64)
    >>> policy, stop = pn.policies.UnitVector(), pn.stopping.MaxIterations(1)
    >>> belief, info = pn.ProbabilisticLinearSolver(policy, stop).solve(A, b)
    >>> belief.mean.tolist()  # x_0 = b_0 / A_00, zero elsewhere
    [0.25, 0.0]
    """

    def __init__(self, order: str = "sequential", block_size: int = 1) -> None:
        if not isinstance(order, str) or order not in _ORDERS:
            raise ValueError(f"order must be one of {_ORDERS}, got {order!r}")
        self.order = order
        self.block_size = check_block_size(block_size)

    @property
    def adaptive(self) -> bool:
        """``True`` for ``order="pivot"`` (it reads the residual), else ``False``."""
        return self.order == "pivot"

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> UnitVectorMemory:
        """No index used yet; ``"random"`` draws its permutation, ``"schur"`` reads ``diag A``."""
        chosen = torch.empty(0, dtype=torch.int64, device=b.device)
        if self.order == "schur":
            try:
                diag = A.diagonal()
            except MissingStructureError as e:
                raise MissingStructureError(
                    f"UnitVector('schur') needs the diagonal of A, which {type(A).__name__} "
                    "does not provide; call to_dense() or choose another order"
                ) from e
            return UnitVectorMemory(chosen, schur=diag.to(dtype=b.dtype, device=b.device))
        if self.order != "random":
            return UnitVectorMemory(chosen)
        g = require_generator(generator, self)
        perm = rnd.randperm(b.shape[0], generator=g, device=b.device)
        return UnitVectorMemory(chosen, perm)

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, UnitVectorMemory]:
        """Return ``(E, memory)`` with ``E`` of shape ``(n, k)``, ``k ≤ block_size``."""
        memory = own_memory(self, state, UnitVectorMemory)
        r = state.residual
        n, used = r.shape[0], memory.chosen.shape[0]
        k = min(self.block_size, n - used)
        if k <= 0:
            return zero_action(r), memory
        schur, seen = memory.schur, memory.seen
        if self.order == "sequential":
            idx = torch.arange(used, used + k, device=r.device)
        elif self.order == "random":
            assert memory.permutation is not None  # drawn by initial_memory for "random"
            idx = memory.permutation[used : used + k]
        elif self.order == "pivot":
            score = r.abs()
            score[memory.chosen] = -1.0  # |r| ≥ 0, so used indices are never picked
            idx = torch.topk(score, k).indices
        else:
            schur, seen = self._schur_diagonal(state, memory)
            score = schur.clone()
            score[memory.chosen] = -torch.inf  # observed: zero up to rounding, never again
            idx = torch.topk(score, k).indices
        E = r.new_zeros(n, k)
        E[idx, torch.arange(k, device=r.device)] = 1.0
        chosen = torch.cat([memory.chosen, idx])
        return E, UnitVectorMemory(chosen, memory.permutation, schur, seen)

    def _schur_diagonal(
        self, state: SolverState, memory: UnitVectorMemory
    ) -> tuple[torch.Tensor, int]:
        """``diag(A − A C_i A)`` and the number of directions it includes (all of them)."""
        belief = state.belief
        if not belief.prior.shares_factors:  # W = A V: the inverse prior
            raise ValueError(
                "UnitVector('schur') reads the Schur complement from the belief's images "
                f"W = A V, which holds under the inverse prior only; got prior {belief.prior!r}"
            )
        assert memory.schur is not None  # set by initial_memory for "schur"
        W = belief.W[:, memory.seen :]  # the directions observed since the last call
        return memory.schur - (W * W).sum(1), belief.W.shape[1]

    def __repr__(self) -> str:
        return f"UnitVector(order={self.order!r}, block_size={self.block_size})"
