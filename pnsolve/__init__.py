"""pnsolve: probabilistic linear solvers and computation-aware Gaussian processes.

Every linear solve is a belief: a Gaussian over the solution whose covariance says
what the finite computation left unknown.
"""

from . import datasets, kernels, krylov, linops, plotting, preconditioners, problems, testing
from .errors import BreakdownError, MissingStructureError, NotPositiveDefiniteError
from .krylov import cg, lanczos
from .solvers import StopReason

__version__ = "0.1.0"

__all__ = [
    "BreakdownError",
    "MissingStructureError",
    "NotPositiveDefiniteError",
    "StopReason",
    "__version__",
    "cg",
    "datasets",
    "kernels",
    "krylov",
    "lanczos",
    "linops",
    "plotting",
    "preconditioners",
    "problems",
    "testing",
]
