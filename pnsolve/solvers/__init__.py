"""The probabilistic linear solver loop and its typed records."""

from .problinsolve import problinsolve
from .solver import ProbabilisticLinearSolver
from .state import SolveInfo, SolverState
from .stop_reason import StopReason

__all__ = ["ProbabilisticLinearSolver", "SolveInfo", "SolverState", "StopReason", "problinsolve"]
