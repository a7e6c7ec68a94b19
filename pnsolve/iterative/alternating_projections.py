"""Alternating projections (block Gauss–Seidel with greedy block choice) for kernel systems."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._validation import check_generator
from ..errors import NotPositiveDefiniteError
from ._common import (
    GUARD_EPOCHS_PER_N,
    Normalised,
    Tracker,
    check_count,
    check_positive_int,
    check_solve_args,
    check_tol,
    column_norms,
    confirm_below,
    excess,
    true_residual,
)
from .result import SolveResult
from .system import KernelSystem

__all__ = ["AlternatingProjections"]


@dataclass(frozen=True)
class AlternatingProjections:
    """Alternating projections onto blocks of rows (Algorithm 2 of Lin et al.).

    The indices ``0, …, n−1`` are cut into ``⌈n/b⌉`` contiguous blocks of ``b =
    block_size`` (the last one may be shorter). Each iteration picks the block ``I``
    with the largest residual, solves the block exactly and updates the full residual:

    ``Δ = K̂[I, I]⁻¹ R[I]``,  ``U[I] += Δ``,  ``R −= K̂[:, I] Δ``.

    This is block Gauss–Seidel with the Gauss–Southwell (greedy) rule; it converges
    for every SPD ``K̂`` and every column at once.

    Parameters
    ----------
    tol
        Relative-residual tolerance of the mean column (column 0).
    tol_probes
        Tolerance of the average relative residual of the probe columns (default ``tol``).
    block_size
        ``b ≥ 1`` (capped at ``n``).
    max_iterations
        Iteration cap; ``None``: iterations worth ``10·n`` epochs.

    Notes
    -----
    *Block choice.* Algorithm 2's criterion, garbled in the paper's text, is read as
    ``argmax_I Σ_j ‖R_j[I]‖``: the sum over columns (mean and probes) of each column's
    residual norm on the block. (The norm of the summed residual columns would let
    columns cancel.)

    *Cost.* Per iteration ``b·n`` entries (``b/n`` epochs) for ``K̂[:, I] Δ``. The
    Cholesky factor of ``K̂[I, I]`` is computed lazily at the first visit of block ``I``
    and cached for the rest of the solve (``b²`` entries, once per block and solve);
    the warm-start residual ``B̃ − K̂Ũ₀`` costs one epoch (a cold start has ``R = B̃``).
    All of it is counted in :attr:`SolveResult.epochs`.

    *Stopping.* Before each iteration: stop if both tolerances hold (on the updated
    residual), after ``max_iterations`` iterations, or if the chosen block's cost
    (``b·n``, plus ``b²`` at a first visit) would take the solve past ``max_epochs``:
    an iteration is never started that would exceed the budget. If a warm start's
    initial residual does not fit, ``x0`` is returned with ``nan`` residual norms.

    *Confirmation.* As for :class:`ConjugateGradients`: tolerances below ``√eps`` are
    confirmed on the true residual (one epoch, when affordable), the residual is
    replaced on failure, and the solve stops when a confirmation shows no progress.

    Raises
    ------
    NotPositiveDefiniteError
        If a diagonal block ``K̂[I, I]`` is not numerically positive definite.
    ArithmeticError
        If the residual becomes non-finite.
    """

    tol: float = 0.01
    tol_probes: float | None = None
    block_size: int = 1000
    max_iterations: int | None = None

    def __post_init__(self) -> None:
        check_tol(self.tol, "tol")
        if self.tol_probes is not None:
            check_tol(self.tol_probes, "tol_probes")
        check_positive_int(self.block_size, "block_size")
        check_count(self.max_iterations, "max_iterations")

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
            Budget in epochs (``None``: until the tolerances or ``max_iterations``).
        generator
            Unused (the block order is fixed and the choice greedy); accepted for a
            uniform solver interface.

        Returns
        -------
        SolveResult
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
        b = min(self.block_size, n)
        starts = list(range(0, n, b))
        problem = Normalised(B, x0)
        tol_probes = self.tol if self.tol_probes is None else self.tol_probes
        track = Tracker(system, k, self.tol, tol_probes, max_epochs)
        max_iterations = self.max_iterations
        if max_iterations is None:
            max_iterations = GUARD_EPOCHS_PER_N * n * len(starts)
        U = problem.U0.clone()
        if problem.warm and not track.affordable(n * n):
            return track.result(problem, U, 0, torch.full((k,), math.nan))
        R = true_residual(system, problem, U) if problem.warm else problem.B.clone()
        confirm = confirm_below(system.dtype, track.tol, track.tol_probes)
        norms, last_excess = column_norms(R), math.inf
        factors: dict[int, torch.Tensor] = {}  # block → Cholesky factor of K̂[I, I]
        iteration = 0
        while not track.met(norms):
            i = _largest_block(R, b)
            idx = torch.arange(starts[i], min(starts[i] + b, n), device=system.device)
            cost = idx.numel() * n + (0 if i in factors else idx.numel() ** 2)
            if iteration >= max_iterations or not track.affordable(cost):
                break
            if i not in factors:
                factors[i] = _cholesky(system.block(idx), i)
            delta = torch.cholesky_solve(R[idx], factors[i])
            U[idx] += delta
            R -= system.columns(idx, delta)
            iteration += 1
            norms = column_norms(R)
            if not bool(torch.isfinite(norms).all()):
                raise ArithmeticError(
                    f"alternating projections: the residual became non-finite at iteration "
                    f"{iteration}"
                )
            track.record(norms)
            if confirm and track.met(norms) and track.affordable(n * n):
                R = true_residual(system, problem, U)
                norms = column_norms(R)
                previous, last_excess = last_excess, excess(track, norms)
                if last_excess >= previous:
                    break
        return track.result(problem, U, iteration, norms)


def _largest_block(R: torch.Tensor, b: int) -> int:
    """Index of the block of ``b`` consecutive rows maximising ``Σ_j ‖R_j[block]‖``."""
    n, k = R.shape
    nb = -(-n // b)
    sq = torch.zeros(nb * b, k, dtype=R.dtype, device=R.device)
    sq[:n] = R * R
    return int(sq.view(nb, b, k).sum(1).sqrt().sum(1).argmax())


def _cholesky(block: torch.Tensor, i: int) -> torch.Tensor:
    L, info = torch.linalg.cholesky_ex(block)
    if int(info) != 0:
        raise NotPositiveDefiniteError(
            f"alternating projections: the diagonal block {i} of K̂ is not numerically "
            "positive definite (increase the noise or use float64)"
        )
    return L
