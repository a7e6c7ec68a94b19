"""What a solve of a kernel system returns."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["SolveResult"]


@dataclass(frozen=True)
class SolveResult:
    """Outcome of ``solver.solve(system, B)`` for ``K̂ U = B``.

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
    solution
        Approximate ``K̂⁻¹ B``, shape ``(n, k)``, in ``B``'s dtype and device.
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
    iterations
        Iterations run.
    residual_norm_mean
        Relative residual norm of column 0.
    residual_norm_probes
        Arithmetic mean of the relative residual norms of columns ``1, …, k−1``
        (``nan`` when ``k == 1``).
    converged
        Whether both reached their tolerances (the probe one is vacuous when ``k == 1``).
    history
        ``(epochs so far, residual_norm_mean, residual_norm_probes)`` after each
        iteration (epochs including the set-up so far), for residual-versus-budget plots
        (the solver's tracked residual: recursive for CG and alternating projections,
        the running estimate for SGD).
    """

    solution: torch.Tensor
    epochs: float
    setup_epochs: float
    iterations: int
    residual_norm_mean: float
    residual_norm_probes: float
    converged: bool
    history: tuple[tuple[float, float, float], ...]
