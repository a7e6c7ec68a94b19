"""The bookkeeping of one run of :func:`~pnsolve.krylov.conjugate_gradient.cg_core`.

The full block of ``k`` columns (iterate, tolerances, per-column stop flags, residual
history, product counts): its start, the active columns it hands the loop, the columns
it freezes and the info it finishes with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .._core.stop_reason import StopReason
from ..linops.base import LinearOperator
from .breakdown import ActiveColumns, check_preconditioner
from .cg_info import CGInfo, ProductCount, stop_reason_of
from .condition_monitor import ConditionMonitor

__all__ = ["CGRun"]


@dataclass
class CGRun:
    """Bookkeeping of one CG run over the full block of ``k`` columns (private to ``cg_core``)."""

    A: LinearOperator
    B: torch.Tensor  # (n, k)
    X: torch.Tensor  # (n, k) the returned iterate
    R: torch.Tensor  # (n, k) initial residual (consumed by ``columns``)
    tol: torch.Tensor  # (k,)
    zero_rhs: torch.Tensor  # (k,) bool
    converged: torch.Tensor  # (k,) bool
    broken: torch.Tensor  # (k,) bool: zero curvature at rounding level
    stagnated: torch.Tensor  # (k,) bool
    col_iters: torch.Tensor  # (k,) long
    true_rn: torch.Tensor  # (k,)
    history: list[torch.Tensor]  # rows (k,)
    count: ProductCount
    exact: bool
    #: The operator of the iteration products: ``A``, or its low-precision form
    #: (:class:`~pnsolve.krylov.mixed_precision.LowPrecisionProducts`); true residuals
    #: always use ``A``.
    products: LinearOperator
    it: int = 0
    #: The κ estimate of a mixed-precision run (``None`` while products are full).
    monitor: ConditionMonitor | None = None

    @classmethod
    def start(
        cls, A: LinearOperator, B: Tensor, x0: Tensor | None, tol: Tensor, exact: bool
    ) -> CGRun:
        """Initial iterate and residual (one product when ``x0`` is given)."""
        n, k = B.shape
        count = ProductCount()
        zero_rhs = torch.linalg.vector_norm(B, dim=0) == 0
        X = torch.zeros_like(B) if x0 is None else x0.reshape(n, k).clone()
        if x0 is not None:
            X[:, zero_rhs] = 0
            R = B - count(A, X)
        else:
            R = B.clone()
        rn = torch.linalg.vector_norm(R, dim=0)
        converged = (rn <= tol) | zero_rhs
        return cls(
            A, B, X, R, tol, zero_rhs, converged,
            broken=torch.zeros_like(converged), stagnated=torch.zeros_like(converged),
            col_iters=torch.zeros(k, dtype=torch.long, device=B.device),
            true_rn=rn.clone(), history=[rn], count=count, exact=exact, products=A,
        )  # fmt: skip

    def columns(self, M: LinearOperator | None) -> ActiveColumns:
        """The unconverged columns with their first direction.

        Classical PCG preconditions all ``k`` residuals before compacting.
        """
        idx = (~self.converged).nonzero().squeeze(1)
        aliased = idx.numel() == self.B.shape[1]
        R = self.R[:, idx] if self.exact else self.R
        Z = R if M is None else M.matmat(R)
        rz = torch.linalg.vecdot(R, Z, dim=0)
        if not self.exact:
            R, Z, rz = R[:, idx], Z[:, idx], rz[idx]
        check_preconditioner(M, rz, 0)
        return ActiveColumns(
            idx, self.X if aliased else self.X[:, idx], self.B[:, idx], R, Z.clone(),
            self.tol[idx], rz, rmax=self.history[0][idx].clone(),
            best=torch.full_like(rz, math.inf), stalls=torch.zeros_like(idx), aliased=aliased,
        )  # fmt: skip

    def freeze(
        self, cols: ActiveColumns, stop: Tensor, done: Tensor, stuck: Tensor, dead: Tensor | None
    ) -> None:
        """Record and drop the columns that stop now (``dead``: ``None`` or a mask)."""
        self.converged[cols.idx[done]] = True
        self.stagnated[cols.idx[stuck & ~done]] = True
        if dead is not None:
            self.broken[cols.idx[dead & ~done]] = True
        self.true_rn[cols.idx[done]] = self.history[-1][cols.idx[done]]
        self.col_iters[cols.idx[stop]] = self.it
        if not cols.aliased:
            self.X[:, cols.idx[stop]] = cols.X[:, stop]
        cols.keep(~stop)

    def finish(self, cols: ActiveColumns | None, reason: StopReason | None) -> CGInfo:
        """Write back the active columns; true residuals of unconverged columns; the info."""
        if cols is not None and cols.idx.numel():
            if not cols.aliased:
                self.X[:, cols.idx] = cols.X
            self.col_iters[cols.idx] = self.it
        open_cols = (~self.converged).nonzero().squeeze(1)
        if open_cols.numel() and self.exact:
            Rt = self.B[:, open_cols] - self.count(self.A, self.X[:, open_cols], check=True)
            self.true_rn[open_cols] = torch.linalg.vector_norm(Rt, dim=0)
        elif open_cols.numel():
            self.true_rn[open_cols] = self.history[-1][open_cols]
        if reason is None or reason is StopReason.CALLBACK:
            reason = stop_reason_of(
                self.converged, self.zero_rhs, self.broken, self.stagnated,
                by_callback=reason is StopReason.CALLBACK,
            )  # fmt: skip
        return CGInfo(
            iterations=self.it,
            products=self.count.products,
            matvecs=self.count.matvecs,
            true_residual_checks=self.count.checks,
            residual_norms=torch.stack(self.history),
            true_residual_norms=self.true_rn,
            tolerances=self.tol,
            column_iterations=self.col_iters,
            converged=self.converged,
            stop_reason=reason,
            precision=getattr(self.products, "precision", "full"),
        )
