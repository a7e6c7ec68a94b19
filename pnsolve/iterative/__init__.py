"""Solvers for kernel systems ``K̂ = k(X, X) + σ² I`` with many right-hand sides.

Hyperparameter training of GPs solves ``K̂ [v_y, v_1, …, v_s] = [y, z_1, …, z_s]``
at every optimiser step: a *mean* system (column 0) and ``s`` probe systems.
:class:`KernelSystem` is ``K̂`` as a :class:`~pnsolve.linops.LinearOperator` whose
accesses (products, rows, columns, blocks) are counted in epochs, so any pnsolve solver
runs on it (the probabilistic linear solver with
:class:`~pnsolve.stopping.EpochBudget`, for instance). The three solvers here share one
interface, ``solution, info = solver.solve(system, B, x0=None, *, max_epochs=None,
generator=None)`` with a :class:`KernelSolveInfo` (iterations, products, residual
norms and stop reason like every pnsolve info, plus epochs):

* :class:`ConjugateGradients`: batched pivoted-Cholesky-preconditioned CG, one epoch
  per iteration, on the loop of :func:`pnsolve.cg`;
* :class:`AlternatingProjections`: greedy block Gauss–Seidel with cached block
  Cholesky factors, ``b/n`` epochs per iteration;
* :class:`StochasticGradientDescent`: minibatch SGD with momentum, ``b/n`` epochs per
  iteration.

All three are *point-estimate* solvers: they return an approximate solution, not a
belief (a distribution over the solution).

Conventions common to all three (Lin et al., Appendix B):

* **Epochs.** One epoch is the cost of evaluating every entry of ``K̂`` once (``n²``
  kernel entries); :attr:`KernelSolveInfo.epochs` counts them exactly, set-up work
  included (``epochs == system.epochs`` after minus before), and
  :attr:`KernelSolveInfo.setup_epochs` says how much of it was set-up.
* **Normalisation.** Each column is solved as ``K̂ ũ_j = b̃_j`` with
  ``b̃_j = b_j / ‖b_j‖`` and ``u_j = ‖b_j‖ ũ_j`` is returned; ``x0`` is scaled the
  same way. Residual norms are therefore relative, ``‖b_j − K̂u_j‖ / ‖b_j‖``. (The
  paper divides by ``‖b_j‖ + ε`` to protect zero columns; here a zero column keeps
  scale 1 and starts at its exact solution 0, whatever ``x0`` holds.)
* **Tolerances.** ``tol`` applies to the mean column, ``tol_probes`` (default ``tol``)
  to the arithmetic mean of the probe columns' norms; a solve stops once both hold.
* **Budget (Algorithms 1–3 of Lin et al.).** ``max_epochs = T`` caps the epochs of the
  *iterations*: at most ``⌊T⌋`` CG iterations, ``⌊T·n/b⌋`` alternating-projections or
  SGD iterations (``b`` the block or batch size; a quotient within rounding of an
  integer counts as that integer, so ``T = 2·b/n`` allows 2). Set-up work (a warm start's initial
  residual, CG's preconditioner, AP's block Cholesky factors, true-residual products)
  is counted in ``epochs`` and ``setup_epochs`` but not capped, so
  ``epochs − setup_epochs ≤ max_epochs``. A budget too small for one iteration raises
  ``ValueError``. Without a budget and without ``max_iterations`` the iterations are
  capped at :data:`DEFAULT_MAX_EPOCHS` epochs (``converged=False`` when that stops
  a solve). ``info.stop_reason`` says which limit ended a solve (``BUDGET``,
  ``MAX_ITERATIONS``).
* **Warm starts.** ``x0`` costs one set-up epoch (its residual ``B̃ − K̂Ũ₀``); a cold
  start has ``R = B̃`` for free.
"""

from .._core.deprecation import renamed_attributes
from ._common import DEFAULT_MAX_EPOCHS
from .affine import AffineMethod, AffineSolveInfo, SweepOperator, affine_solve
from .alternating_projections import AlternatingProjections
from .cg import ConjugateGradients
from .chebyshev import Chebyshev
from .cyclic_projections import CyclicProjections
from .divergence import DIVERGENCE_FACTOR, DivergenceError
from .gauss_seidel import GaussSeidel
from .info import KernelSolveInfo
from .richardson import JacobiIteration, Richardson
from .sgd import StochasticGradientDescent
from .spectral_bounds import SpectralBounds, spectral_bounds
from .system import KernelSystem

__all__ = [
    "DEFAULT_MAX_EPOCHS",
    "DIVERGENCE_FACTOR",
    "AffineMethod",
    "AffineSolveInfo",
    "AlternatingProjections",
    "Chebyshev",
    "ConjugateGradients",
    "CyclicProjections",
    "DivergenceError",
    "GaussSeidel",
    "JacobiIteration",
    "KernelSolveInfo",
    "KernelSystem",
    "Richardson",
    "SpectralBounds",
    "StochasticGradientDescent",
    "SweepOperator",
    "affine_solve",
    "spectral_bounds",
]

#: Old names, importable with a DeprecationWarning.
__getattr__ = renamed_attributes(__name__, {"Jacobi": "JacobiIteration"})
