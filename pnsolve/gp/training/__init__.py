"""Hyperparameter training for iterative GPs (Lin et al., 2024).

:func:`train_hyperparameters` runs Adam on the softplus-parametrised hyperparameters
of a Matérn-3/2 ARD GP; each step's gradient comes from an estimator in
:mod:`pnsolve.gp.mll_estimators` (exact, standard, pathwise) fed by a solver in
:mod:`pnsolve.iterative` (CG, alternating projections, SGD) with warm starts and
epoch budgets. :class:`TrainingConfig` names the variant, :class:`StepRecord` is the
per-step log, checkpoints make interrupted runs resumable.
"""

from .checkpoint import load_checkpoint, save_checkpoint
from .config import ESTIMATORS, SOLVERS, TrainingConfig
from .heuristic import initial_hyperparameters
from .loop import make_estimator, make_solver, train_hyperparameters
from .predict import predictive
from .record import StepRecord, TrainingResult

__all__ = [
    "ESTIMATORS",
    "SOLVERS",
    "StepRecord",
    "TrainingConfig",
    "TrainingResult",
    "initial_hyperparameters",
    "load_checkpoint",
    "make_estimator",
    "make_solver",
    "predictive",
    "save_checkpoint",
    "train_hyperparameters",
]
