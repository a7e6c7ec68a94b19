"""Bayesian GP hyperparameters: SGLD with ULISSE gradients and a Metropolis–Hastings reference.

Filippone & Engler (2015), "Enabling scalable stochastic gradient-based inference for
Gaussian processes by employing the Unbiased LInear System SolvEr (ULISSE)": sample
``p(θ | y, X)`` for the log-hyperparameters ``θ`` of GP regression by stochastic
gradient Langevin dynamics, with unbiased gradient estimates from randomly truncated CG
(:class:`LogMarginalGradient`); the exact-likelihood reference is Metropolis–Hastings.
"""

from .chains import SAMPLERS, ChainConfig, HyperSamples, sample_hyperparameters
from .exact import exact_log_marginal
from .gradient import GRADIENTS, GradientEstimate, LogMarginalGradient
from .hyperparameters import PARAMETRIZATIONS, LogHyperparameters
from .map_estimate import LaplaceFit, laplace_preconditioner, log_posterior
from .mh import MetropolisHastings, MHState
from .predictive import (
    PREDICTIVE_METHODS,
    MixturePredictive,
    mixture_predictive,
    type_ii_maximum_likelihood,
)
from .priors import GammaPrior, LogPrior
from .sgld import SGLD, SGLDResult, SGLDState, step_schedule

__all__ = [
    "GRADIENTS",
    "PARAMETRIZATIONS",
    "PREDICTIVE_METHODS",
    "SAMPLERS",
    "SGLD",
    "ChainConfig",
    "GammaPrior",
    "GradientEstimate",
    "HyperSamples",
    "LaplaceFit",
    "LogHyperparameters",
    "LogMarginalGradient",
    "LogPrior",
    "MHState",
    "MetropolisHastings",
    "MixturePredictive",
    "SGLDResult",
    "SGLDState",
    "exact_log_marginal",
    "laplace_preconditioner",
    "log_posterior",
    "mixture_predictive",
    "sample_hyperparameters",
    "step_schedule",
    "type_ii_maximum_likelihood",
]
