"""A mixed-precision CG run that falls back to full-precision products.

Where the low-precision products would cost more than they save (``κ(A)`` beyond
:func:`~pnsolve.krylov.condition_monitor.condition_limit`, a stalled true residual, a
curvature inside their rounding band), :func:`~pnsolve.krylov.cg` warns, naming
``precision``, and restarts from its iterate with ``A``'s own products.
"""

from __future__ import annotations

import math
import warnings

import torch

from .breakdown import ActiveColumns
from .cg_run import CGRun
from .condition_monitor import condition_limit
from .mixed_precision import product_eps

__all__ = ["full_precision_from_now", "stalled", "watch_condition"]


def watch_condition(run: CGRun, cols: ActiveColumns, beta: torch.Tensor) -> bool:
    """Record ``β``; where an estimate is due and ``κ(A)`` exceeds the limit, warn; return that."""
    monitor = run.monitor
    assert monitor is not None
    monitor.record_beta(cols.idx, beta)
    if not monitor.due():
        return False
    kappa = monitor.estimate(int(cols.idx[0]))
    limit = condition_limit(product_eps(run.products))
    if not kappa > limit:  # NaN (no estimate): carry on
        return False
    _warn(
        run,
        f"κ(A) ≥ {kappa:.2e} (estimated after {run.it} iterations) exceeds {limit:.2g}, "
        "beyond which these products cost CG more than 1.5× the iterations",
    )
    return True


def stalled(rn: torch.Tensor, it: int) -> str:
    """Why a run falls back when its true residuals ``rn`` stalled at iteration ``it``."""
    return (
        f"the low-precision products stalled the true residual at {float(rn.max()):.2e} "
        f"after {it + 1} iterations"
    )


def _warn(run: CGRun, why: str) -> None:
    precision = getattr(run.products, "precision", "mixed")
    warnings.warn(
        f"precision={precision!r}: {why}; the run restarts from its iterate with "
        "full-precision products (as precision='full')",
        RuntimeWarning,
        stacklevel=5,
    )


def full_precision_from_now(
    run: CGRun, cols: ActiveColumns, why: str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Continue a mixed-precision run with ``A``'s own products, restarted (warns ``why``).

    The residuals are replaced by true ones (one product); every direction restarts, since
    the Krylov basis built with low-precision products would slow full-precision CG (twice
    the iterations where it was kept, measured). Returns ``(‖r‖, restart)``, shapes
    ``(ka,)``.
    """
    if why is not None:
        _warn(run, why)
    run.products = run.A
    run.monitor = None
    cols.R = cols.B - run.count(run.A, cols.X, check=True)
    rn = torch.linalg.vector_norm(cols.R, dim=0)
    cols.rmax = rn.clone()
    cols.stalls = torch.zeros_like(cols.stalls)
    cols.best = torch.full_like(cols.best, math.inf)
    return rn, torch.ones_like(rn, dtype=torch.bool)
