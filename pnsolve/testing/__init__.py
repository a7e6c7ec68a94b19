"""Public testing utilities.

Tolerances, product counting, SPD strategies, contract mixins, device redirection and
host-synchronisation counting.
"""

from .counting import CountingOperator
from .device import DeviceMode, HostSyncCounter, count_host_syncs
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
    "DeviceMode",
    "HostSyncCounter",
    "conjugacy_tol",
    "count_host_syncs",
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
