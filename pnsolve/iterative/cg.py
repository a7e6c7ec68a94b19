"""Batched preconditioned conjugate gradients for kernel systems (Algorithm 1)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import torch

from .._core.errors import BreakdownError, NotPositiveDefiniteError
from .._core.validation import check_generator
from ..preconditioners import PivotedCholesky
from ._common import (
    Normalised,
    Tracker,
    check_count,
    check_solve_args,
    check_tol,
    column_norms,
    confirm_below,
    excess,
    true_residual,
)
from .result import SolveResult
from .system import KernelSystem

__all__ = ["ConjugateGradients"]


@dataclass(frozen=True)
class ConjugateGradients:
    """Preconditioned CG run on all right-hand sides at once (Algorithm 1 of Lin et al.).

    The ``k`` columns are ``k`` independent CG recursions (own ``α_j, β_j``) that share
    one product ``K̂ D`` per iteration: **one epoch per iteration**.

    Parameters
    ----------
    tol
        Relative-residual tolerance of the mean column (column 0).
    tol_probes
        Tolerance of the average relative residual of the probe columns (default ``tol``).
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

    *Set-up* (counted in :attr:`SolveResult.epochs` and
    :attr:`SolveResult.setup_epochs`, outside the budget): the initial residual
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
    gives up when a confirmation shows no progress over the previous one (the
    tolerance is below the attainable accuracy).

    *Algorithm 1* initialises the direction with ``d ← b`` (a misprint); we use the
    preconditioned residual ``d ← P⁻¹ r`` of standard PCG.

    Raises
    ------
    NotPositiveDefiniteError
        If a direction has non-positive curvature ``dᵀ K̂ d ≤ 0`` (the iteration is named).
    BreakdownError
        If the residual becomes non-finite (a subclass of ``ArithmeticError``).
    """

    tol: float = 0.01
    tol_probes: float | None = None
    max_iterations: int | None = None
    preconditioner_rank: int = 100

    def __post_init__(self) -> None:
        check_tol(self.tol, "tol")
        if self.tol_probes is not None:
            check_tol(self.tol_probes, "tol_probes")
        check_count(self.max_iterations, "max_iterations")
        if check_count(self.preconditioner_rank, "preconditioner_rank") is None:
            raise TypeError("preconditioner_rank must be an int (0 for no preconditioner)")

    def solve(
        self,
        system: KernelSystem,
        B: torch.Tensor,
        x0: torch.Tensor | None = None,
        *,
        max_epochs: float | None = None,
        generator: torch.Generator | None = None,
    ) -> SolveResult:
        """Solve ``K̂ U = B``.

        Parameters
        ----------
        system
            The :class:`~pnsolve.iterative.KernelSystem`.
        B
            Right-hand sides, shape ``(n, k)``: column 0 the mean system, the others probes.
        x0
            Warm start, shape ``(n, k)`` (``None``: zeros).
        max_epochs
            Budget ``T ≥ 1`` of the iterations, in epochs: at most ``⌊T⌋`` iterations
            (set-up work is counted but not capped, see the class notes). ``None``:
            until the tolerances, ``max_iterations`` or, if that is ``None`` too,
            :data:`~pnsolve.iterative.DEFAULT_MAX_EPOCHS`.
        generator
            Unused (CG is deterministic); accepted for a uniform solver interface.

        Returns
        -------
        SolveResult

        Raises
        ------
        ValueError
            Naming ``max_epochs`` if it allows no iteration (``max_epochs < 1``).
        """
        system, B, x0, max_epochs = check_solve_args(system, B, x0, max_epochs)
        check_generator(generator)
        with torch.no_grad():
            return self._solve(system, B, x0, max_epochs)

    def _solve(
        self,
        system: KernelSystem,
        B: torch.Tensor,
        x0: torch.Tensor | None,
        max_epochs: float | None,
    ) -> SolveResult:
        n, k = B.shape
        problem = Normalised(B, x0)
        tol_probes = self.tol if self.tol_probes is None else self.tol_probes
        track = Tracker(
            system,
            k,
            self.tol,
            tol_probes,
            max_epochs=max_epochs,
            max_iterations=self.max_iterations,
            iteration_epochs=Fraction(1),
            what="CG",
        )
        rank = min(self.preconditioner_rank, n - 1)
        U = problem.U0.clone()
        with track.setup():
            R = true_residual(system, problem, U) if problem.warm else problem.B.clone()
        norms, last_excess = column_norms(R), math.inf
        if track.met(norms) or not track.can_iterate(0):
            return track.result(problem, U, 0, norms)  # no preconditioner needed
        with track.setup():
            precond = _preconditioner(system, rank)
        confirm = confirm_below(system.dtype, track.tol, track.tol_probes)
        active, P = norms > track.tols, precond(R)
        D, gamma = P.clone(), (R * P).sum(0)
        iteration = 0
        while not track.met(norms) and track.can_iterate(iteration):
            a = active.nonzero().squeeze(-1)
            Z = system.matmul(D[:, a])  # the iteration's only product with K̂
            curvature = (D[:, a] * Z).sum(0)
            if not bool((curvature > 0).all()):
                raise NotPositiveDefiniteError(
                    f"CG met non-positive curvature dᵀK̂d ≤ 0 at iteration {iteration}: "
                    "K̂ is not numerically positive definite (increase the noise)",
                    iteration,
                )
            alpha = gamma[a] / curvature
            U[:, a] += alpha * D[:, a]
            R[:, a] -= alpha * Z
            P_a = precond(R[:, a])
            gamma_new = (R[:, a] * P_a).sum(0)
            D[:, a] = P_a + (gamma_new / gamma[a]) * D[:, a]
            gamma[a] = gamma_new
            iteration += 1
            norms = column_norms(R)
            if not bool(torch.isfinite(norms).all()):
                raise BreakdownError(f"CG residual became non-finite at iteration {iteration}")
            track.record(norms)
            active &= norms > track.tols
            if confirm and track.met(norms):
                with track.setup():
                    R = true_residual(system, problem, U)
                norms = column_norms(R)
                previous, last_excess = last_excess, excess(track, norms)
                if track.met(norms) or last_excess >= previous:
                    break
                active, P = norms > track.tols, precond(R)  # restart from the true residual
                D, gamma = P.clone(), (R * P).sum(0)
        return track.result(problem, U, iteration, norms)


def _preconditioner(system: KernelSystem, rank: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``R ↦ P⁻¹ R`` for the rank-``rank`` pivoted Cholesky of ``K̂`` (identity for 0)."""
    if rank == 0:
        return lambda R: R.clone()
    M = PivotedCholesky(system.as_linop(), rank)
    return M.matmat
