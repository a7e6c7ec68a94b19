"""Stopping criteria for probabilistic solvers, composable with ``|``, ``&`` and ``~``.

Limits: :class:`MaxIterations`, :class:`MatvecBudget` (columns multiplied) and
:class:`EpochBudget` (kernel entries, in epochs, of an operator that counts them such
as :class:`pnsolve.iterative.KernelSystem`); goals: :class:`ResidualNorm`,
:class:`PosteriorContraction`. ``a | b`` builds :class:`AnyOf`, ``a & b`` :class:`AllOf`
and ``~a`` :class:`Not`.
"""

from .._core.deprecation import renamed_attributes
from .base import AllOf, AnyOf, Not, StoppingCriterion
from .criteria import EpochBudget, MatvecBudget, MaxIterations, PosteriorContraction, ResidualNorm

__all__ = [
    "AllOf",
    "AnyOf",
    "EpochBudget",
    "MatvecBudget",
    "MaxIterations",
    "Not",
    "PosteriorContraction",
    "ResidualNorm",
    "StoppingCriterion",
]

#: Old names, importable with a DeprecationWarning.
__getattr__ = renamed_attributes(__name__, {"Any": "AnyOf", "All": "AllOf"})
