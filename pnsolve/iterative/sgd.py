"""Minibatch stochastic gradient descent with momentum for kernel systems (Algorithm 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .._core import random as rnd
from .._core.validation import check_positive_int
from ._base import KernelSolverBase
from ._common import Normalised, Tracker, check_count, check_tol, column_norms
from .info import KernelSolveInfo

__all__ = ["DEFAULT_LEARNING_RATE", "DIVERGENCE_FACTOR", "StochasticGradientDescent"]

#: Default ``γ`` (see :class:`StochasticGradientDescent`, "Learning rate").
DEFAULT_LEARNING_RATE = 1.0
#: The run is declared divergent once the residual estimate exceeds this factor times
#: ``max(1, its initial value)`` (relative norms; a stable run stays near or below 1).
DIVERGENCE_FACTOR = 1e4


@dataclass(frozen=True)
class StochasticGradientDescent(KernelSolverBase):
    """Minibatch SGD with momentum on the quadratic objective (Algorithm 3 of Lin et al.).

    Each iteration draws a batch ``I`` of ``b`` distinct indices uniformly at random
    and, for all columns at once (on the normalised problem ``K̂ Ũ = B̃``),

    ``G = K̂[I, :] Ũ − B̃[I]``,  ``M ← ρ M − (γ/b) G`` (on rows ``I``; ``M ← ρ M``
    elsewhere),  ``Ũ ← Ũ + M``,  ``R̂[I] ← −G``.

    *Objective and scaling.* This is SGD with step ``γ`` on
    ``L(u) = (1/n)(½ uᵀK̂u − b̃ᵀu)``, whose gradient ``(K̂u − b̃)/n`` has the unbiased
    minibatch estimate ``(1/b) Σ_{i∈I} e_i (K̂u − b̃)_i``: exactly Algorithm 3's
    ``γ/b`` update. It is a *point-estimate* solver: it returns an approximate solution
    and a :class:`KernelSolveInfo`, no belief (no distribution over the solution; for a
    belief about ``K̂⁻¹ b`` run the :class:`~pnsolve.ProbabilisticLinearSolver` on the
    same :class:`KernelSystem`). There is no Polyak averaging (it would spoil the residual
    estimate). The mean dynamics are heavy-ball on ``K̂/n``: stable for
    ``γ λ_max(K̂)/n < 2(1 + ρ)``. Since ``λ_max(K̂) ≤ n·outputscale + σ²``,
    ``γ ≤ 2(1 + ρ)/(outputscale + σ²/n)`` is safe for *every* kernel matrix; local
    kernels (short lengthscales, many input dimensions) have ``λ_max ≪ n`` and allow
    much more, which is where the paper's rates 20–30 come from.

    *Learning rate.* The default :data:`DEFAULT_LEARNING_RATE` ``γ = 1`` satisfies the
    bound for every lengthscale as long as ``γ (outputscale + σ²/n) < 2(1 + ρ) = 3.8`` (at
    ``ρ = 0.9``), so it does not diverge on standardised data (outputscale ≈ 1,
    noise 0.1–1) even when training drives the lengthscales up; measured on UCI
    subsets (Matérn-3/2, ``b = 500``) the bound above is where divergence sets in.
    It is slow: a direction with eigenvalue ``λ`` of ``K̂`` shrinks roughly by
    ``exp(−γλ/((1−ρ)b))`` per epoch, so the noise-level directions (``λ ≈ σ²``) need
    many epochs. Tune ``γ`` upwards per data set as the paper does (the largest rate
    of a grid that does not diverge on the first solve; ``λ_max(K̂)/n`` is about
    0.01–0.15 at lengthscale 1 on standardised UCI inputs).

    *Residual estimate.* SGD never forms the full residual. As in the paper, an
    estimate ``R̂`` is kept and updated only on the batch rows, with the (pre-step)
    residual ``−G`` that the gradient provides for free; it starts as ``B̃`` for a cold
    start and as the true residual ``B̃ − K̂Ũ₀`` (one epoch) for a warm start (the
    paper starts from ``B̃`` in both cases, which makes a good warm start look
    unconverged for about ``n/b · log n`` iterations). :attr:`KernelSolveInfo.history`
    and ``residual_norms`` report the estimate.

    *True residual.* When the estimate meets the tolerances, or when the iteration cap
    is reached, the true residual ``B̃ − K̂Ũ`` is computed (one set-up epoch each, see
    below): it alone decides ``converged`` and the reported residual norms. If the
    estimate claimed convergence but the truth disagrees, the estimate is replaced by
    the true residual and SGD continues.

    Parameters
    ----------
    tol, tol_probes
        Relative-residual tolerances: mean column (column 0), probes' average (default ``tol``).
    batch_size
        ``b ≥ 1`` (capped at ``n``); ``b·n`` entries (``b/n`` epochs) per iteration.
    learning_rate
        ``γ > 0`` in the scaling above.
    momentum
        ``0 ≤ ρ < 1``.
    max_iterations
        Iteration cap (``None``: none beyond the budget; see ``max_epochs`` of
        :meth:`solve`).

    Notes
    -----
    *Budget (Algorithm 3: "while t < (n/b)·T").* ``max_epochs = T`` caps the
    iterations at ``⌊T·n/b⌋`` (``b`` the batch size after capping at ``n``; each costs
    ``b·n`` entries, ``b/n`` epochs), so the iterations spend at most ``T`` epochs.
    ``T < b/n`` raises ``ValueError``. With ``max_epochs=None`` and
    ``max_iterations=None`` the cap is :data:`~pnsolve.iterative.DEFAULT_MAX_EPOCHS`
    epochs' worth of iterations.

    *Set-up* (counted in :attr:`KernelSolveInfo.epochs` and
    :attr:`KernelSolveInfo.setup_epochs`, outside the budget): the warm-start residual
    (one epoch) and the true residuals above (one epoch each: at least one per solve
    that iterates, the final one; more when the estimate claims convergence falsely).

    Raises
    ------
    ValueError
        Naming ``learning_rate`` when the residual estimate or the true residual
        diverges (non-finite or above :data:`DIVERGENCE_FACTOR` times its start).
    """

    tol: float = 0.01
    tol_probes: float | None = None
    batch_size: int = 500
    learning_rate: float = DEFAULT_LEARNING_RATE
    momentum: float = 0.9
    max_iterations: int | None = None
    draws: ClassVar[str | None] = "the batches"

    def __post_init__(self) -> None:
        self._check_tolerances()
        check_positive_int(self.batch_size, "batch_size", type_name=True)
        check_tol(self.learning_rate, "learning_rate")
        if isinstance(self.momentum, bool) or not isinstance(self.momentum, int | float):
            raise TypeError(f"momentum must be a float, got {type(self.momentum).__name__}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must satisfy 0 ≤ momentum < 1, got {self.momentum}")
        check_count(self.max_iterations, "max_iterations")

    def _solve(
        self, problem: Normalised, track: Tracker, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, KernelSolveInfo]:
        assert generator is not None  # required (checked by solve)
        system, n = track.system, track.system.n
        b, _ = self._iteration_size(n)
        U, M = problem.U0.clone(), torch.zeros_like(problem.B)
        R, norms = track.initial_residual(problem, U)
        exact = True
        limit = DIVERGENCE_FACTOR * max(1.0, float(norms.max()))
        iteration = 0
        while True:
            if not exact and (track.met(norms) or not track.can_iterate(iteration)):
                R, norms = track.true_residual(problem, U)  # replaces the estimate
                norms, exact = self._checked(norms, limit, iteration), True
            if track.met(norms) or not track.can_iterate(iteration):
                break
            idx = rnd.randperm(n, generator=generator, device=system.device)[:b]
            G = system.rows(idx, U) - problem.B[idx]  # minibatch gradient (rows I)
            M.mul_(self.momentum)
            M[idx] -= (self.learning_rate / b) * G
            U += M
            R[idx] = -G  # sparse update of the residual estimate
            iteration += 1
            norms, exact = self._checked(column_norms(R), limit, iteration), False
            track.record(norms)
        return track.result(problem, U, iteration, norms)

    def _iteration_size(self, n: int) -> tuple[int, str]:
        b = min(self.batch_size, n)
        return b, f"SGD with batch size b = {b}"

    def _checked(self, norms: torch.Tensor, limit: float, iteration: int) -> torch.Tensor:
        if not bool(torch.isfinite(norms).all()) or float(norms.max()) > limit:
            raise ValueError(
                f"SGD diverged at iteration {iteration} (relative residual "
                f"{float(norms.max()):.3g}): learning_rate={self.learning_rate} is too large "
                f"for this system (momentum={self.momentum}, batch_size={self.batch_size})"
            )
        return norms
