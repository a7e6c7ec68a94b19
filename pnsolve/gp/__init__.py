"""Gaussian-process models that query solver beliefs.

:class:`ExactGP` (Cholesky reference), :class:`IterGP` (computation-aware posterior from a
probabilistic solve), :class:`CaGP` (IterGP's posterior with hyperparameters and
actions chosen by the computation-aware ELBO),
:func:`~pnsolve.gp.pathwise.sample_posterior` (pathwise posterior function samples from
one batched solve), LOVE (:class:`LoveCache`, exact and
iterative GPs' ``posterior(..., method="love")``: the belief posterior of the cache, as
IterGP's is of its solve, returned as a :class:`LovePosterior`; posteriors are pure
queries), :func:`fit_exact_hyperparameters`
(type-II maximum likelihood by Cholesky, the reference fit), marginal-likelihood
gradient estimators (:mod:`~pnsolve.gp.mll_estimators`: exact, standard, pathwise) and
iterative hyperparameter training (:mod:`~pnsolve.gp.training`).

Every model keeps what ``fit`` computed in one record with its
:class:`Provenance`; a query after the hyperparameters changed either fits again or
raises :class:`FitChangedError` (see each model's Notes), never answers from a stale fit.
"""

from . import bayes
from .affine_gp import AffineGP, AffinePosterior
from .cagp import CaGP, CaGPClassifier
from .exact import ExactGP
from .exact_fit import ExactFit, fit_exact_hyperparameters
from .fit_state import FitChangedError, Provenance
from .itergp import IterGP
from .iterncgp import IterNCGP, LaplaceState, NewtonStep, NewtonStopReason
from .love import LoveCache
from .love_posterior import LovePosterior
from .mll_estimators import (
    ExactEstimator,
    GradientEstimator,
    PathwiseEstimator,
    StandardEstimator,
)
from .pathwise import PathwiseSamples, sample_posterior
from .posterior import GaussianPosterior, NegativeVarianceError
from .qsgp import QSGP
from .training import TrainingConfig, TrainingResult, train_hyperparameters

__all__ = [
    "QSGP",
    "AffineGP",
    "AffinePosterior",
    "CaGP",
    "CaGPClassifier",
    "ExactEstimator",
    "ExactFit",
    "ExactGP",
    "FitChangedError",
    "GaussianPosterior",
    "GradientEstimator",
    "IterGP",
    "IterNCGP",
    "LaplaceState",
    "LoveCache",
    "LovePosterior",
    "NegativeVarianceError",
    "NewtonStep",
    "NewtonStopReason",
    "PathwiseEstimator",
    "PathwiseSamples",
    "Provenance",
    "StandardEstimator",
    "TrainingConfig",
    "TrainingResult",
    "bayes",
    "fit_exact_hyperparameters",
    "sample_posterior",
    "train_hyperparameters",
]
