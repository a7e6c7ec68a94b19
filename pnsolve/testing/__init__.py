"""Public testing utilities: tolerances, product counting, SPD strategies, contract mixins."""

from .counting import CountingOperator
from .moments import moment_threshold, moment_z_scores
from .tolerances import (
    conjugacy_tol,
    eps,
    exact_tol,
    iterative_tol,
    krylov_tol,
    peer_tol,
    rtol_for,
    statistical_threshold,
)

__all__ = [
    "CountingOperator",
    "conjugacy_tol",
    "eps",
    "exact_tol",
    "iterative_tol",
    "krylov_tol",
    "moment_threshold",
    "moment_z_scores",
    "peer_tol",
    "rhs",
    "rtol_for",
    "spd_matrices",
    "spd_problems",
    "statistical_threshold",
]

_STRATEGIES = ("rhs", "spd_matrices", "spd_problems")


def __getattr__(name: str) -> object:
    # The hypothesis strategies load on first use: hypothesis is a test-only dependency.
    if name in _STRATEGIES:
        from . import strategies

        return getattr(strategies, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
