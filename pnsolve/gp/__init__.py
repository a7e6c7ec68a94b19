"""Gaussian-process models that query solver beliefs: ExactGP (Cholesky reference), IterGP."""

from .exact import ExactGP
from .itergp import IterGP
from .posterior import GaussianPosterior

__all__ = ["ExactGP", "GaussianPosterior", "IterGP"]
