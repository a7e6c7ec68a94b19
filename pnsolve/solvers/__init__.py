"""The probabilistic linear solver loop and its typed records."""

from .._core.stop_reason import StopReason
from .problinsolve import problinsolve
from .solver import ProbabilisticLinearSolver
from .state import SolveInfo, SolverState
from .virtual_run import virtual_run

__all__ = [
    "ProbabilisticLinearSolver",
    "SolveInfo",
    "SolverState",
    "StopReason",
    "problinsolve",
    "virtual_run",
]
