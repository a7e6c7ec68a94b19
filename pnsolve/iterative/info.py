"""What a solve of a kernel system reports next to its solution."""

from __future__ import annotations

from dataclasses import dataclass

from .._core.info import IterationInfo

__all__ = ["KernelSolveInfo"]


@dataclass(frozen=True, eq=False, kw_only=True)
class KernelSolveInfo(IterationInfo):
    """How ``solver.solve(system, B)`` solved ``K̂ U = B``: ``U, info = solver.solve(...)``.

    Column 0 of ``B`` is the *mean* system ``K̂ v_y = y``; columns ``1, …, k−1`` are
    probe systems. Residual norms are relative: ``‖b_j − K̂ u_j‖ / ‖b_j‖`` (for a zero
    column ``b_j = 0``, whose solution is ``0``, the absolute ``‖K̂ u_j‖``; see
    :mod:`pnsolve.iterative`).

    **Cost.** One epoch is ``n²`` kernel entries (every entry of ``K̂`` once). The
    budget ``max_epochs`` of ``solve`` caps the epochs of the *iterations* only, as in
    Algorithms 1–3 of Lin et al. (CG: at most ``⌊max_epochs⌋`` iterations; alternating
    projections and SGD with block/batch size ``b``: at most ``⌊max_epochs · n/b⌋``).
    Everything else is set-up, counted exactly in :attr:`setup_epochs` but not capped.
    So ``epochs − setup_epochs ≤ max_epochs`` (up to the rounding of the float
    subtraction) and ``epochs == system.epochs`` after minus before the solve.

    Attributes
    ----------
    iterations
        Iterations run.
    products
        Full products ``K̂ V`` (one epoch each, whatever the number of columns;
        ``system.products`` after minus before): CG's iterations, a warm start's initial
        residual and true-residual products. Alternating projections and SGD iterate
        on column and row blocks of ``K̂``, counted in :attr:`epochs`, not here.
    residual_norms
        Relative residual norms of every column, row 0 at the start and one row after
        each iteration, shape ``(iterations + 1, k)``: the solver's tracked residual
        (recursive for CG and alternating projections, the running estimate for SGD; a
        frozen CG column repeats its last value).
    stop_reason
        ``CONVERGED`` (both tolerances hold; ``ZERO_RHS`` when ``B = 0``), ``BUDGET``
        (the iterations ``max_epochs`` allows were spent), ``MAX_ITERATIONS`` (the
        solver's ``max_iterations`` or the safety cap
        :data:`~pnsolve.iterative.DEFAULT_MAX_EPOCHS`), ``STAGNATION`` (a true-residual
        confirmation of a tolerance below ``√eps`` showed no progress) or ``BREAKDOWN``
        (a CG direction with zero curvature at rounding level).
    epochs
        All epochs spent by this solve (``system.epochs`` after minus before):
        iterations plus :attr:`setup_epochs`.
    setup_epochs
        The part of :attr:`epochs` spent outside the iterations (not capped by
        ``max_epochs``): the initial residual ``B̃ − K̂Ũ₀`` of a warm start (1 epoch),
        CG's pivoted-Cholesky preconditioner (``n`` diagonal entries and one column per
        pivot), alternating projections' block Cholesky factors (``b²`` entries per
        block, once per solve), true-residual products (1 epoch each: CG's and
        alternating projections' confirmations of tolerances below ``√eps``, SGD's
        checks of its residual estimate and its final true residual).
    residual_norm_mean
        Relative residual norm of column 0 at the end.
    residual_norm_probes
        Arithmetic mean of the relative residual norms of columns ``1, …, k−1``
        (``nan`` when ``k == 1``).
    converged
        Whether both reached their tolerances (the probe one is vacuous when ``k == 1``).
    history
        ``(epochs so far, residual_norm_mean, residual_norm_probes)`` after each
        iteration (epochs including the set-up so far), for residual-versus-budget plots
        (from the rows of :attr:`residual_norms`).
    """

    epochs: float
    setup_epochs: float
    residual_norm_mean: float
    residual_norm_probes: float
    converged: bool
    history: tuple[tuple[float, float, float], ...]

    @property
    def success(self) -> bool:
        """Whether both tolerances hold (= :attr:`converged`)."""
        return self.converged
