"""Batched preconditioned conjugate gradients for kernel systems (Algorithm 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._core.errors import BreakdownError
from .._core.stop_reason import StopReason
from ..krylov.conjugate_gradient import cg_core
from ..linops.base import LinearOperator
from ..preconditioners import PivotedCholesky
from ._base import KernelSolverBase
from ._common import Normalised, Tracker, check_count, confirm_below, excess
from .info import KernelSolveInfo
from .system import KernelSystem

__all__ = ["ConjugateGradients"]


@dataclass(frozen=True)
class ConjugateGradients(KernelSolverBase):
    """Preconditioned CG run on all right-hand sides at once (Algorithm 1 of Lin et al.).

    The ``k`` columns are ``k`` independent CG recursions (own ``α_j, β_j``) that share
    one product ``K̂ D`` per iteration: **one epoch per iteration**. The iterations are
    those of :func:`pnsolve.cg`: the loop is :func:`pnsolve.krylov.conjugate_gradient.cg_core`,
    here with per-column tolerances, the recursive residual (classical PCG) and a stop
    hook for the aggregate tolerances (see *Stopping* below).

    Parameters
    ----------
    tol, tol_probes
        Relative-residual tolerances: mean column (column 0), probes' average (default ``tol``).
    max_iterations
        Iteration cap (``None``: none beyond the budget; see ``max_epochs`` of
        :meth:`solve`).
    preconditioner_rank
        Rank of the pivoted-Cholesky preconditioner ``P = L Lᵀ + D`` of ``K̂``
        (:class:`~pnsolve.preconditioners.PivotedCholesky` with the residual diagonal
        ``D = diag(K̂ − L Lᵀ) ≥ σ²`` off the pivots); capped at ``n − 1`` (a full-rank
        factor leaves no residual diagonal and a Woodbury inverse that cancels
        catastrophically); ``0`` runs plain CG.

    Notes
    -----
    *Budget (Algorithm 1: "while t < T").* ``max_epochs = T`` caps the iterations:
    at most ``⌊T⌋`` of them, one epoch each, whether the start is cold or warm and
    whatever the preconditioner costs. ``T < 1`` raises ``ValueError``. With
    ``max_epochs=None`` and ``max_iterations=None`` the cap is
    :data:`~pnsolve.iterative.DEFAULT_MAX_EPOCHS` iterations.

    *Set-up* (counted in :attr:`KernelSolveInfo.epochs` and
    :attr:`KernelSolveInfo.setup_epochs`, outside the budget): the initial residual
    ``B̃ − K̂ Ũ₀`` of a warm start (one epoch; a cold start has ``R = B̃`` for free),
    the preconditioner (``n`` diagonal entries plus one column of ``K̂`` per pivot,
    ``(rank + 1)/n`` epochs, built only when an iteration runs) and true-residual
    confirmations (below).

    *Stopping.* Before each iteration: stop if both tolerances hold (on the recursively
    updated residual) or the iteration cap is reached. A column is frozen once its own
    residual meets its tolerance (``tol`` for column 0, ``tol_probes`` for the
    others); frozen columns leave the product (which still costs one epoch).

    *Confirmation.* With a tolerance below ``√eps`` of the dtype (``1.5e-8`` in float64,
    ``3.5e-4`` in float32) the recursive residual may have drifted from ``B̃ − K̂Ũ`` by
    more than the tolerance, so convergence is confirmed on the true residual (one
    set-up epoch). If the confirmation fails, CG restarts from the true residual; it
    gives up (``StopReason.STAGNATION``) when a confirmation shows no progress over the
    previous one (the tolerance is below the attainable accuracy).

    *Algorithm 1* initialises the direction with ``d ← b`` (a misprint); we use the
    preconditioned residual ``d ← P⁻¹ r`` of standard PCG.

    Raises
    ------
    NotPositiveDefiniteError
        If a direction has clearly negative curvature ``dᵀ K̂ d < 0`` (the iteration is
        named); curvature zero at rounding level freezes the column
        (``StopReason.BREAKDOWN``), as in :func:`pnsolve.cg`.
    BreakdownError
        If the residual becomes non-finite (a subclass of ``ArithmeticError``).
    """

    tol: float = 0.01
    tol_probes: float | None = None
    max_iterations: int | None = None
    preconditioner_rank: int = 100

    def __post_init__(self) -> None:
        self._check_tolerances()
        check_count(self.max_iterations, "max_iterations")
        if check_count(self.preconditioner_rank, "preconditioner_rank") is None:
            raise TypeError("preconditioner_rank must be an int (0 for no preconditioner)")

    def _solve(
        self, problem: Normalised, track: Tracker, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, KernelSolveInfo]:
        system = track.system
        rank = min(self.preconditioner_rank, system.n - 1)
        M = _LazyPivotedCholesky(system, rank) if rank > 0 else None
        gate = _Gate(track)
        U = problem.U0 if problem.warm else None
        confirm = confirm_below(system.dtype, track.tol, track.tol_probes)
        while True:  # one run, and one more per failed confirmation of a tight tolerance
            U, info = cg_core(
                system,
                problem.B,
                U,
                tolerances=track.tols,
                maxiter=track.max_iterations - gate.iterations,
                M=M,
                stop=gate,
                exact_residuals=False,
            )
            gate.iterations += info.iterations
            claimed = info.stop_reason is StopReason.CONVERGED and info.iterations > 0
            if not (confirm and claimed):
                break
            gate.confirming = True  # the next run starts from the true residual
        track.setup_entries = track.spent - gate.iterations * track.n2
        reason = info.stop_reason if info.stop_reason is not StopReason.MAX_ITERATIONS else None
        return track.result(problem, U, gate.iterations, info.residual_norms[-1], reason)

    def _iteration_size(self, n: int) -> tuple[int, str]:
        return n, "CG"  # one epoch


class _Gate:
    """The stop hook of the CG runs of one solve.

    A ``StopHook`` of :func:`~pnsolve.krylov.conjugate_gradient.cg_core`: records the
    history and stops on the aggregate tolerances; at the start of a run that confirms a
    claim, judges the true residual.
    """

    def __init__(self, track: Tracker) -> None:
        self.track = track
        self.iterations = 0  # of the runs before the current one
        self.confirming = False
        self.last_excess = math.inf

    def __call__(self, iteration: int, norms: torch.Tensor) -> StopReason | None:
        track = self.track
        if iteration == 0 and self.confirming:  # the true residual of a claimed solution
            previous, self.last_excess = self.last_excess, excess(track, norms)
            if track.met(norms):
                return StopReason.CONVERGED
            return StopReason.STAGNATION if self.last_excess >= previous else None
        if iteration == 0:
            track.initial(norms)
        else:
            if not bool(torch.isfinite(norms).all()):
                raise BreakdownError(
                    f"CG residual became non-finite at iteration {self.iterations + iteration}"
                )
            track.record(norms)
        return StopReason.CONVERGED if track.met(norms) else None


class _LazyPivotedCholesky(LinearOperator):
    """``P⁻¹`` of the rank-``rank`` pivoted Cholesky of ``K̂``.

    Factorised at the first application (so a solve that runs no iteration pays nothing
    for it).
    """

    def __init__(self, system: KernelSystem, rank: int) -> None:
        super().__init__(system.shape, system.dtype, system.device, is_symmetric=True)
        self.system, self.rank = system, rank
        self._inverse: PivotedCholesky | None = None

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        if self._inverse is None:
            self._inverse = PivotedCholesky(self.system, self.rank)
        return self._inverse.matmat(X)
