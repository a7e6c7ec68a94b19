"""Evaluation metrics: regression errors, classification accuracy, NLL, calibration (ECE)."""

from .classification import (
    accuracy,
    ece,
    gaussian_log_likelihood,
    nll,
    poisson_log_likelihood,
)
from .regression import rmse, smae

__all__ = [
    "accuracy",
    "ece",
    "gaussian_log_likelihood",
    "nll",
    "poisson_log_likelihood",
    "rmse",
    "smae",
]
