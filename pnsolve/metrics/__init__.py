"""Evaluation metrics: regression errors, classification accuracy, NLL, calibration.

Calibration of probabilities (ECE) and of GP uncertainty on prior draws
(:func:`prior_draw_calibration`).
"""

from .calibration import CalibrationStatistics, prior_draw_calibration, z_statistics
from .classification import (
    accuracy,
    ece,
    gaussian_log_likelihood,
    nll,
    poisson_log_likelihood,
)
from .regression import rmse, smae

__all__ = [
    "CalibrationStatistics",
    "accuracy",
    "ece",
    "gaussian_log_likelihood",
    "nll",
    "poisson_log_likelihood",
    "prior_draw_calibration",
    "rmse",
    "smae",
    "z_statistics",
]
