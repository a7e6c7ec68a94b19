"""pnsolve: probabilistic linear solvers and computation-aware Gaussian processes.

Every linear solve is a belief: a Gaussian over the solution whose covariance says
what the finite computation left unknown.
"""

from . import (
    beliefs,
    datasets,
    gp,
    iterative,
    kernels,
    krylov,
    likelihoods,
    linops,
    metrics,
    plotting,
    policies,
    preconditioners,
    problems,
    randomized,
    solvers,
    stopping,
    testing,
)
from ._core.errors import BreakdownError, MissingStructureError, NotPositiveDefiniteError
from .krylov import cg, lanczos
from .solvers import (
    ProbabilisticLinearSolver,
    SolveInfo,
    SolverState,
    StopReason,
    problinsolve,
)

__version__ = "0.1.0"

__all__ = [
    "BreakdownError",
    "MissingStructureError",
    "NotPositiveDefiniteError",
    "ProbabilisticLinearSolver",
    "SolveInfo",
    "SolverState",
    "StopReason",
    "__version__",
    "beliefs",
    "cg",
    "datasets",
    "gp",
    "iterative",
    "kernels",
    "krylov",
    "lanczos",
    "likelihoods",
    "linops",
    "metrics",
    "plotting",
    "policies",
    "preconditioners",
    "problems",
    "problinsolve",
    "randomized",
    "solvers",
    "stopping",
    "testing",
]
