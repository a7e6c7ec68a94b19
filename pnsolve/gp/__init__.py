"""Gaussian-process models that query solver beliefs.

:class:`ExactGP` (Cholesky reference), :class:`IterGP` (computation-aware posterior from a
probabilistic solve), :func:`~pnsolve.gp.pathwise.sample_posterior` (pathwise posterior
function samples from one batched solve), LOVE (:class:`LoveCache`, exact and
iterative GPs' ``posterior(..., method="love")``), and :func:`fit_exact_hyperparameters`
(type-II maximum likelihood by Cholesky, the reference fit).
"""

from .exact import ExactGP
from .exact_fit import ExactFit, fit_exact_hyperparameters
from .itergp import IterGP
from .iterncgp import IterNCGP, NewtonStep
from .love import LoveCache
from .pathwise import PathwiseSamples, sample_posterior
from .posterior import GaussianPosterior

__all__ = [
    "ExactFit",
    "ExactGP",
    "GaussianPosterior",
    "IterGP",
    "IterNCGP",
    "LoveCache",
    "NewtonStep",
    "PathwiseSamples",
    "fit_exact_hyperparameters",
    "sample_posterior",
]
