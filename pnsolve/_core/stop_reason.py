"""Why an iterative method stopped."""

from __future__ import annotations

import enum

__all__ = ["StopReason"]


class StopReason(enum.Enum):
    """Reason recorded in a solver's info object when it stops.

    Non-convergence is information, not a warning: inspect ``info.stop_reason``.
    """

    #: Every right-hand side met its tolerance ``‖r‖ ≤ max(rtol‖b‖, atol)``.
    CONVERGED = "converged"
    #: The right-hand side was zero; the solution is zero after zero iterations.
    ZERO_RHS = "zero_rhs"
    #: The iteration limit was reached before convergence.
    MAX_ITERATIONS = "max_iterations"
    #: A budget of products or epochs was spent.
    BUDGET = "budget"
    #: The recurrence broke down (zero or dependent direction; invariant subspace found).
    BREAKDOWN = "breakdown"
    #: A user callback or stopping criterion asked to stop.
    CALLBACK = "callback"
    #: A randomized truncation (ULISSE's Russian roulette) ended the run.
    TRUNCATED = "truncated"
    #: A composed stopping criterion (e.g. a negation ``~c``) fired.
    CRITERION = "criterion"
    #: The posterior covariance along the query direction fell below its tolerance.
    CONTRACTION = "contraction"
    #: The true residual stopped decreasing above the tolerance: the requested accuracy
    #: is below what the working precision can attain (e.g. float32 on an ill-conditioned
    #: system), so iterating further would not help.
    STAGNATION = "stagnation"
