"""Stopping criteria for probabilistic solvers, composable with ``|``, ``&`` and ``~``."""

from .base import All, Any, Not, StoppingCriterion
from .criteria import MatvecBudget, MaxIterations, PosteriorContraction, ResidualNorm

__all__ = [
    "All",
    "Any",
    "MatvecBudget",
    "MaxIterations",
    "Not",
    "PosteriorContraction",
    "ResidualNorm",
    "StoppingCriterion",
]
