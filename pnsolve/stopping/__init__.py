"""Stopping criteria for probabilistic solvers, composable with ``|``, ``&`` and ``~``.

Limits: :class:`MaxIterations`, :class:`MatvecBudget` (columns multiplied) and
:class:`EpochBudget` (kernel entries, in epochs, of an operator that counts them such
as :class:`pnsolve.iterative.KernelSystem`); goals: :class:`ResidualNorm`,
:class:`PosteriorContraction`.
"""

from .base import All, Any, Not, StoppingCriterion
from .criteria import EpochBudget, MatvecBudget, MaxIterations, PosteriorContraction, ResidualNorm

__all__ = [
    "All",
    "Any",
    "EpochBudget",
    "MatvecBudget",
    "MaxIterations",
    "Not",
    "PosteriorContraction",
    "ResidualNorm",
    "StoppingCriterion",
]
