"""Hyperparameter training for iterative GPs (Lin et al., 2024).

:func:`train_hyperparameters` runs Adam on the softplus-parametrised hyperparameters
of a Matérn-3/2 ARD GP; each step's gradient comes from an estimator in
:mod:`pnsolve.gp.mll_estimators` (exact, standard, pathwise) fed by a solver in
:mod:`pnsolve.iterative` (CG, alternating projections, SGD) with warm starts and
epoch budgets. :class:`TrainingConfig` names the variant, :class:`StepRecord` is the
per-step log (its solver fields from a :class:`StepSolve`), checkpoints
(:class:`TrainingCheckpoint`) make interrupted runs resumable.
"""

from .checkpoint import TrainingCheckpoint, load_checkpoint, save_checkpoint
from .config import ESTIMATORS, SOLVERS, TrainingConfig
from .heuristic import initial_hyperparameters
from .loop import train_hyperparameters
from .predict import predictive
from .record import StepRecord, StepSolve, TrainingResult
from .run import make_estimator, make_solver

__all__ = [
    "ESTIMATORS",
    "SOLVERS",
    "StepRecord",
    "StepSolve",
    "TrainingCheckpoint",
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
