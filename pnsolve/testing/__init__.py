"""Public testing utilities: tolerances, product counting, SPD strategies, contract mixins."""

from .counting import CountingOperator
from .tolerances import (
    eps,
    exact_tol,
    iterative_tol,
    krylov_tol,
    rtol_for,
    statistical_threshold,
)

__all__ = [
    "CountingOperator",
    "eps",
    "exact_tol",
    "iterative_tol",
    "krylov_tol",
    "rtol_for",
    "statistical_threshold",
]
