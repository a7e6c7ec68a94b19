"""What a solve of a kernel system returns."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["SolveResult"]


@dataclass(frozen=True)
class SolveResult:
    """Outcome of ``solver.solve(system, B)`` for ``K̂ U = B``.

    Column 0 of ``B`` is the *mean* system ``K̂ v_y = y``; columns ``1, …, k−1`` are
    probe systems. Residual norms are relative: ``‖b_j − K̂ u_j‖ / ‖b_j‖`` (exactly:
    divided by ``‖b_j‖ + ε``, see :mod:`pnsolve.iterative`).

    Attributes
    ----------
    solution
        Approximate ``K̂⁻¹ B``, shape ``(n, k)``, in ``B``'s dtype and device.
    epochs
        Epochs spent by this solve (``system.epochs`` after minus before), including
        set-up work: the initial residual of a warm start, preconditioner columns,
        block Cholesky factors and any true-residual products.
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
        iteration, for residual-versus-budget plots (the solver's tracked residual:
        recursive for CG and alternating projections, the running estimate for SGD).
    """

    solution: torch.Tensor
    epochs: float
    iterations: int
    residual_norm_mean: float
    residual_norm_probes: float
    converged: bool
    history: tuple[tuple[float, float, float], ...]
