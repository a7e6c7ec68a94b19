"""Pivoted-Cholesky actions: the columns of a greedy pivoted Cholesky factorisation of ``A``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .._core.deprecation import renamed_attributes
from .._core.errors import MissingStructureError
from ..linops.base import LinearOperator
from ._common import check_block_size, own_memory, zero_action
from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["PivotedCholeskyActions", "PivotedCholeskyMemory"]


@dataclass(frozen=True, eq=False)
class PivotedCholeskyMemory:
    """Per-run memory of :class:`PivotedCholeskyActions`: the partial factorisation so far.

    Attributes
    ----------
    factor
        ``L``, shape ``(n, i)``: ``A ≈ L Lᵀ`` on the pivots (its columns are the actions).
    residual_diagonal
        ``diag(A − L Lᵀ)``, the diagonal of the Schur complement, shape ``(n,)``
        (zero at the pivots, clamped at zero elsewhere).
    pivots
        Pivot indices in order, shape ``(i,)`` (``int64``).
    stop
        Pivot size at or below which the factorisation counts as complete
        (``tol · tr A``).
    """

    factor: torch.Tensor
    residual_diagonal: torch.Tensor
    pivots: torch.Tensor
    stop: float


class PivotedCholeskyActions(Policy):
    """Actions ``l_1, l_2, …``: the columns of ``A``'s greedy pivoted Cholesky factor.

    Each step picks the pivot ``j`` with the largest diagonal entry of the Schur
    complement ``A − L Lᵀ``, reads column ``j`` of ``A`` (one row of the symmetric
    operator, ``A.row_block([j])``), and acts along the new factor column
    ``l = (A e_j − L L[j]ᵀ) / √d_j``. The actions span ``{A e_j : j ∈ pivots}``, so
    for a kernel system ``K + σ² I`` the belief is (up to the ``σ² e_j`` part) the
    subset-of-regressors / Nyström approximation with the greedily chosen training
    inputs as inducing points: it captures the top eigenspace of ``K`` nearly as
    well as its eigenvectors would (measured on concrete, n = 500, Matérn-3/2), and
    far better than observing the pivots themselves (``UnitVector("schur")``, the
    subset-of-data solution).

    The actions depend on ``A`` alone, never on ``b``: the policy is not
    :attr:`adaptive` and its beliefs are calibrated.

    Parameters
    ----------
    block_size
        Pivots per iteration (greedy in sequence, each one updating the Schur
        diagonal): actions have shape ``(n, k)``, ``k ≤ block_size``.
    tol
        The factorisation is complete once the largest Schur diagonal entry is at most
        ``tol · tr A`` (default ``n · eps``); the policy then returns a zero action and
        the solver stops with ``StopReason.BREAKDOWN``.

    Notes
    -----
    Cost per pivot, besides the solver's one product: one row of ``A`` (``n`` entries;
    for a kernel matrix ``n`` kernel evaluations, ``1/n`` of a product) and ``O(n i)``
    to update the factor; memory ``n × i`` (as much as the belief's own factors).
    ``A`` needs a structured diagonal and structured row access (a
    :class:`~pnsolve.MissingStructureError` says so otherwise; the policy never
    spends hidden products).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> b = torch.tensor([1.0, 2.0], dtype=torch.float64)
    >>> policy, stop = pn.policies.PivotedCholeskyActions(), pn.stopping.MaxIterations(2)
    >>> belief, info = pn.ProbabilisticLinearSolver(policy, stop).solve(A, b)
    >>> bool(torch.allclose(belief.mean, torch.linalg.solve(A, b))), belief.calibrated
    (True, True)
    """

    def __init__(self, block_size: int = 1, *, tol: float | None = None) -> None:
        self.block_size = check_block_size(block_size)
        if tol is not None and (
            isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < 1
        ):
            raise ValueError(f"tol must be a number in [0, 1), got {tol!r}")
        self.tol = None if tol is None else float(tol)

    @property
    def adaptive(self) -> bool:
        """``False``: the pivots and columns come from ``A`` alone (calibrated beliefs)."""
        return False

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> PivotedCholeskyMemory:
        """No pivot yet; reads ``diag A`` once."""
        n = b.shape[0]
        try:
            d = A.diagonal().detach().to(dtype=b.dtype, device=b.device).clone()
        except MissingStructureError as e:
            raise MissingStructureError(
                f"PivotedCholeskyActions needs the diagonal of A, which {type(A).__name__} does "
                "not provide; call to_dense() or choose another policy"
            ) from e
        tol = n * torch.finfo(b.dtype).eps if self.tol is None else self.tol
        stop = tol * float(d.clamp_min(0).sum())
        pivots = torch.empty(0, dtype=torch.int64, device=b.device)
        return PivotedCholeskyMemory(b.new_zeros(n, 0), d, pivots, stop)

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, PivotedCholeskyMemory]:
        """Return ``(L_new, memory)``: the next ``≤ block_size`` factor columns ``(n, k)``."""
        memory = own_memory(self, state, PivotedCholeskyMemory)
        L, d, pivots = memory.factor, memory.residual_diagonal.clone(), memory.pivots
        columns: list[torch.Tensor] = []
        for _ in range(self.block_size):
            j = int(torch.argmax(d))
            pivot = float(d[j])
            if not pivot > memory.stop or math.isnan(pivot):
                break
            col = self._column(state.A, j).to(d.dtype)
            if L.shape[1]:
                col = col - L @ L[j]
            col = col / math.sqrt(pivot)
            d.sub_(col * col).clamp_(min=0.0)
            d[j] = 0.0  # exactly: the Schur complement vanishes at the pivots
            L = torch.cat([L, col.unsqueeze(-1)], dim=1)
            pivots = torch.cat([pivots, pivots.new_tensor([j])])
            columns.append(col)
        if not columns:
            return zero_action(state.residual), memory
        new = torch.stack(columns, dim=1)
        return new, PivotedCholeskyMemory(L, d, pivots, memory.stop)

    @staticmethod
    def _column(A: LinearOperator, j: int) -> torch.Tensor:
        """Column ``j`` of the symmetric ``A`` as its row; never a product."""
        try:
            return A.row_block([j])[0].detach()
        except MissingStructureError as e:
            raise MissingStructureError(
                f"PivotedCholeskyActions reads columns of A as rows, and {type(A).__name__} has "
                "no structured row access; call to_dense() or choose another policy"
            ) from e

    def __repr__(self) -> str:
        tol = "" if self.tol is None else f", tol={self.tol}"
        return f"PivotedCholeskyActions(block_size={self.block_size}{tol})"


#: ``PivotedCholesky`` (renamed: the preconditioner owns the name).
__getattr__ = renamed_attributes(__name__, {"PivotedCholesky": "PivotedCholeskyActions"})
