"""Evaluation metrics: regression errors, classification accuracy, NLL, calibration.

Calibration of probabilities (ECE) and of GP uncertainty on prior draws
(:func:`prior_draw_calibration`). MCMC diagnostics of samples shaped
``(chains, draws, parameters)``: Gelman–Rubin PSRF (:func:`gelman_rubin`,
:func:`psrf_curve`), rank-normalised split-R̂ (:func:`split_rhat`), bulk effective sample
size (:func:`ess`) and a per-parameter table (:func:`mcmc_summary`).
"""

from .calibration import CalibrationStatistics, prior_draw_calibration, z_statistics
from .classification import (
    accuracy,
    ece,
    gaussian_log_likelihood,
    nll,
    poisson_log_likelihood,
)
from .mcmc import (
    PSRF_THRESHOLD,
    ParameterSummary,
    ess,
    gelman_rubin,
    mcmc_summary,
    psrf_curve,
    split_rhat,
)
from .regression import rmse, smae

__all__ = [
    "PSRF_THRESHOLD",
    "CalibrationStatistics",
    "ParameterSummary",
    "accuracy",
    "ece",
    "ess",
    "gaussian_log_likelihood",
    "gelman_rubin",
    "mcmc_summary",
    "nll",
    "poisson_log_likelihood",
    "prior_draw_calibration",
    "psrf_curve",
    "rmse",
    "smae",
    "split_rhat",
    "z_statistics",
]
