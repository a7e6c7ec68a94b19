"""Alternating projections (block Gauss–Seidel with greedy block choice) for kernel systems."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._core.errors import NotPositiveDefiniteError
from .._core.stop_reason import StopReason
from .._core.validation import check_positive_int
from ._base import KernelSolverBase
from ._common import Normalised, Tracker, check_count, column_norms, confirm_below, excess
from .info import KernelSolveInfo

__all__ = ["AlternatingProjections"]


@dataclass(frozen=True)
class AlternatingProjections(KernelSolverBase):
    """Alternating projections onto blocks of rows (Algorithm 2 of Lin et al.).

    The indices ``0, …, n−1`` are cut into ``⌈n/b⌉`` contiguous blocks of ``b =
    block_size`` (the last one may be shorter). Each iteration picks the block ``I``
    with the largest residual, solves the block exactly and updates the full residual:

    ``Δ = K̂[I, I]⁻¹ R[I]``,  ``U[I] += Δ``,  ``R −= K̂[:, I] Δ``.

    This is block Gauss–Seidel with the Gauss–Southwell (greedy) rule; it converges
    for every SPD ``K̂`` and every column at once. It is a *point-estimate* solver: it
    returns an approximate solution and a :class:`KernelSolveInfo`, no belief (no
    distribution over the solution); for a belief about ``K̂⁻¹ b`` run the
    :class:`~pnsolve.ProbabilisticLinearSolver` on the same :class:`KernelSystem`.

    Parameters
    ----------
    tol, tol_probes
        Relative-residual tolerances: mean column (column 0), probes' average (default ``tol``).
    block_size
        ``b ≥ 1`` (capped at ``n``).
    max_iterations
        Iteration cap (``None``: none beyond the budget; see ``max_epochs`` of
        :meth:`solve`).

    Notes
    -----
    *Block choice.* Algorithm 2's criterion, garbled in the paper's text, is read as
    ``argmax_I Σ_j ‖R_j[I]‖``: the sum over columns (mean and probes) of each column's
    residual norm on the block. (The norm of the summed residual columns would let
    columns cancel.)

    *Cost of an iteration.* ``|I|·n`` entries for ``K̂[:, I] Δ``: ``b/n`` epochs
    (less for a shorter last block).

    *Budget (Algorithm 2: "while t < (n/b)·T").* ``max_epochs = T`` caps the
    iterations at ``⌊T·n/b⌋`` (``b`` the block size after capping at ``n``), whatever the
    set-up costs, so the iterations spend at most ``T`` epochs. ``T < b/n`` raises
    ``ValueError``. With ``max_epochs=None`` and ``max_iterations=None`` the cap is
    :data:`~pnsolve.iterative.DEFAULT_MAX_EPOCHS` epochs' worth of iterations.

    *Set-up* (counted in :attr:`KernelSolveInfo.epochs` and
    :attr:`KernelSolveInfo.setup_epochs`, outside the budget): the Cholesky factor of
    ``K̂[I, I]`` is computed lazily at the first visit of block ``I`` and cached for the
    rest of the solve (``|I|²`` entries, once per block and solve, as in the paper);
    the warm-start residual ``B̃ − K̂Ũ₀`` costs one epoch (a cold start has ``R = B̃``);
    true-residual confirmations (below) one epoch each.

    *Stopping.* Before each iteration: stop if both tolerances hold (on the updated
    residual) or the iteration cap is reached.

    *Confirmation.* As for :class:`ConjugateGradients`: tolerances below ``√eps`` are
    confirmed on the true residual (one set-up epoch), the residual is replaced on
    failure, and the solve stops when a confirmation shows no progress.

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
        self._check_tolerances()
        check_positive_int(self.block_size, "block_size", type_name=True)
        check_count(self.max_iterations, "max_iterations")

    def _solve(
        self, problem: Normalised, track: Tracker, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, KernelSolveInfo]:
        system, n = track.system, track.system.n
        b, _ = self._iteration_size(n)
        starts = list(range(0, n, b))
        U = problem.U0.clone()
        R, norms = track.initial_residual(problem, U)
        confirm = confirm_below(system.dtype, track.tol, track.tol_probes)
        last_excess = math.inf
        factors: dict[int, torch.Tensor] = {}  # block → Cholesky factor of K̂[I, I]
        blocks = [  # the index tensor of each block, built once
            torch.arange(lo, min(lo + b, n), device=system.device) for lo in starts
        ]
        iteration = 0
        while not track.met(norms) and track.can_iterate(iteration):
            i = _largest_block(R, b)
            idx, lo = blocks[i], starts[i]
            if i not in factors:
                with track.setup():
                    factors[i] = _cholesky(system.block(idx), i)
            delta = torch.cholesky_solve(R[lo : lo + idx.numel()], factors[i])
            U[lo : lo + idx.numel()] += delta
            R -= system.columns(idx, delta)
            iteration += 1
            norms = column_norms(R)
            if not bool(torch.isfinite(norms).all()):
                raise ArithmeticError(
                    f"alternating projections: the residual became non-finite at iteration "
                    f"{iteration}"
                )
            track.record(norms)
            if confirm and track.met(norms):
                R, norms = track.true_residual(problem, U)
                previous, last_excess = last_excess, excess(track, norms)
                if last_excess >= previous:
                    return track.result(problem, U, iteration, norms, StopReason.STAGNATION)
        return track.result(problem, U, iteration, norms)

    def _iteration_size(self, n: int) -> tuple[int, str]:
        b = min(self.block_size, n)
        return b, f"alternating projections with block size b = {b}"


def _largest_block(R: torch.Tensor, b: int) -> int:
    """Index of the block of ``b`` consecutive rows maximising ``Σ_j ‖R_j[block]‖``."""
    n, k = R.shape
    full = n // b  # whole blocks; a shorter last block is summed on its own (no padding copy)
    sq = R * R
    sums = sq[: full * b].view(full, b, k).sum(1)
    if full * b < n:
        sums = torch.cat([sums, sq[full * b :].sum(0, keepdim=True)])
    return int(sums.sqrt().sum(1).argmax())


def _cholesky(block: torch.Tensor, i: int) -> torch.Tensor:
    L, info = torch.linalg.cholesky_ex(block)
    if int(info) != 0:
        raise NotPositiveDefiniteError(
            f"alternating projections: the diagonal block {i} of K̂ is not numerically "
            "positive definite (increase the noise or use float64)"
        )
    return L
