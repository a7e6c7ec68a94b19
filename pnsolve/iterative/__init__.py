"""Solvers for kernel systems ``K̂ = k(X, X) + σ² I`` with many right-hand sides.

Hyperparameter training of GPs solves ``K̂ [v_y, v_1, …, v_s] = [y, z_1, …, z_s]``
at every optimiser step: a *mean* system (column 0) and ``s`` probe systems.
:class:`KernelSystem` provides ``K̂`` through counted, matrix-free accesses; the three
solvers share one interface, ``solver.solve(system, B, x0=None, *, max_epochs=None,
generator=None) -> SolveResult``:

* :class:`ConjugateGradients`: batched pivoted-Cholesky-preconditioned CG, one epoch
  per iteration;
* :class:`AlternatingProjections`: greedy block Gauss–Seidel with cached block
  Cholesky factors, ``b/n`` epochs per iteration;
* :class:`StochasticGradientDescent`: minibatch SGD with momentum, ``b/n`` epochs per
  iteration.

Conventions common to all three (Lin et al., Appendix B):

* **Epochs.** One epoch is the cost of evaluating every entry of ``K̂`` once (``n²``
  kernel entries); :attr:`SolveResult.epochs` counts them exactly, set-up work included.
* **Normalisation.** Each column is solved as ``K̂ ũ_j = b̃_j`` with
  ``b̃_j = b_j / (‖b_j‖ + ε)`` (``ε`` the smallest normal number of the dtype, which only
  protects zero columns) and ``u_j = (‖b_j‖ + ε) ũ_j`` is returned; ``x0`` is scaled the
  same way. Residual norms are therefore relative, ``‖b_j − K̂u_j‖ / ‖b_j‖``.
* **Tolerances.** ``tol`` applies to the mean column, ``tol_probes`` (default ``tol``)
  to the arithmetic mean of the probe columns' norms; a solve stops once both hold.
* **Budget.** ``max_epochs`` caps the epochs of one solve: no iteration is started
  whose cost would exceed it, so ``result.epochs ≤ max_epochs`` always.
* **Warm starts.** ``x0`` costs one epoch (its residual ``B̃ − K̂Ũ₀``); a cold start
  has ``R = B̃`` for free.
"""

from .alternating_projections import AlternatingProjections
from .cg import ConjugateGradients
from .result import SolveResult
from .sgd import StochasticGradientDescent
from .system import KernelSystem

__all__ = [
    "AlternatingProjections",
    "ConjugateGradients",
    "KernelSystem",
    "SolveResult",
    "StochasticGradientDescent",
]
