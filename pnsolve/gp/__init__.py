"""Gaussian-process models that query solver beliefs.

:class:`ExactGP` (Cholesky reference), :class:`IterGP` (computation-aware posterior from a
probabilistic solve), :func:`~pnsolve.gp.pathwise.sample_posterior` (pathwise posterior
function samples from one batched solve).
"""

from .exact import ExactGP
from .itergp import IterGP
from .love import LoveCache
from .pathwise import PathwiseSamples, sample_posterior
from .posterior import GaussianPosterior

__all__ = [
    "ExactGP",
    "GaussianPosterior",
    "IterGP",
    "LoveCache",
    "PathwiseSamples",
    "sample_posterior",
]
