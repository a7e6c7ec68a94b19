"""One iteration of the CG loop: the general step and its host-decided form on the CPU.

:func:`step` is written for any device: it reads its flags in one host synchronisation
and computes everything else without branching. On the CPU a synchronisation costs
nothing, and the masks, ``where`` and stacked flags that avoid it cost more than the
vector updates of a small system (about 40 tensor operations per iteration against
SciPy's 8; 0.17 ms per iteration at n = 2 000, a third of a product). :func:`host_step`
decides an ordinary iteration in Python instead, with the same tensor operations for
every value (so the iterates are the general step's, bit for bit), and hands any
iteration that is not ordinary (curvature not positive and finite, a convergence claim,
a residual to replace) to the general step's code from the point it reached.
"""

from __future__ import annotations

import math

import torch

from ..linops.base import LinearOperator
from .breakdown import (
    RELIABLE_UPDATE_FACTOR,
    ActiveColumns,
    curvature_failure,
    next_direction,
    not_pd_preconditioner,
    replace_residuals,
    replacement_check,
)
from .cg_fallback import full_precision_from_now, stalled
from .cg_run import CGRun
from .mixed_precision import product_eps, reliable_update_factor

__all__ = ["host_direction", "host_step", "on_host", "step"]


def on_host(run: CGRun) -> bool:
    """Whether :func:`host_step` runs this iteration: ``pn.cg`` on the CPU, full-precision products.

    Mixed-precision runs (their condition monitor records every ``α``) and classical PCG
    (the kernel-system CG, whose order of operations is kept) take :func:`step`.
    """
    full = run.monitor is None and run.products is run.A
    return run.exact and full and run.B.device.type == "cpu"


def host_step(run: CGRun, cols: ActiveColumns, M: LinearOperator | None) -> torch.Tensor | None:
    """One iteration of :func:`step`, decided on the host; ``None`` when it was ordinary.

    An ordinary iteration (every curvature positive and finite, no residual to check) ends
    here, and its direction is :func:`host_direction`'s. Otherwise the general step
    finishes the iteration and its restart mask is returned, as :func:`step` would.
    """
    cols.resolve_pending()  # a test the general step deferred
    AP = run.count(run.products, cols.P)
    pAp = torch.linalg.vecdot(cols.P, AP, dim=0)
    if not all(0.0 < value < math.inf for value in pAp.tolist()):
        return step(run, cols, M, AP)
    alpha = cols.rz / pAp
    cols.X.addcmul_(cols.P, alpha)
    cols.R.addcmul_(AP, alpha, value=-1.0)
    rn = torch.linalg.vector_norm(cols.R, dim=0)
    eps = product_eps(run.products)
    factor = reliable_update_factor(eps, RELIABLE_UPDATE_FACTOR) if eps > 1e-10 else None
    if factor is None:  # convergence claims only: norms and tolerances are exact as floats
        norms = rn.tolist()
        any_check = any(r <= t for r, t in zip(norms, cols.tol.tolist(), strict=True))
        check = replacement_check(cols, rn, None) if any_check else None
    else:  # the tensors' own rounding of factor · rmax decides, as in `step`
        check = replacement_check(cols, rn, factor)
        any_check = bool(check.any())
    if check is not None and any_check:
        return settle(run, cols, rn, check, True, None, None)
    if factor is not None:  # the largest residual since the last replacement (read above)
        torch.maximum(cols.rmax, rn, out=cols.rmax)
    run.it += 1
    _record(run, cols, rn)
    return None


def host_direction(cols: ActiveColumns, M: LinearOperator | None, it: int) -> None:
    """``z = M r``, ``p ← z + β p``, ``rz ← rᵀz`` after an ordinary :func:`host_step`.

    :func:`~pnsolve.krylov.breakdown.next_direction` without restarts; ``rᵀ M r > 0``
    is tested at once (``NotPositiveDefiniteError`` naming iteration ``it``).
    """
    Z = cols.R if M is None else M.matmat(cols.R)
    rz = torch.linalg.vecdot(cols.R, Z, dim=0)
    if M is not None and not all(value > 0 for value in rz.tolist()):  # NaN fails too
        raise not_pd_preconditioner(it)
    cols.P.mul_(rz / cols.rz).add_(Z)
    cols.rz = rz


def step(
    run: CGRun, cols: ActiveColumns, M: LinearOperator | None, AP: torch.Tensor | None = None
) -> torch.Tensor:
    """One iteration on the active columns (one product with ``A``; ``AP``: already taken).

    Stops the columns that are done. Returns the mask of the remaining columns whose
    direction restarts.

    One host synchronisation in an ordinary iteration: the flags "every curvature
    positive", "a residual to replace (or, classically, a column done)" and the deferred
    preconditioner test are read together; everything else is computed on the device
    without branching. Rare events (curvature at rounding level, replacements, columns
    stopping) take a few more.

    Classical PCG (``not run.exact``) updates unfused (``x + α p``, not ``addcmul``)
    and computes the next direction before freezing, as the kernel-system CG always did.
    """
    if AP is None:
        AP = run.count(run.products, cols.P)
    eps = product_eps(run.products)
    pAp = torch.linalg.vecdot(cols.P, AP, dim=0)
    positive = (pAp > 0) & (pAp < math.inf)
    alpha = torch.where(positive, cols.rz / pAp, 0.0)
    if run.monitor is not None:
        run.monitor.record_alpha(cols.idx, alpha)
    if run.exact:  # pn.cg: fused updates, residual replacement
        cols.X.addcmul_(cols.P, alpha)
        cols.R.addcmul_(AP, alpha, value=-1.0)
        rn = torch.linalg.vector_norm(cols.R, dim=0)
        factor = reliable_update_factor(eps, RELIABLE_UPDATE_FACTOR) if eps > 1e-10 else None
        check = replacement_check(cols, rn, factor)
    else:  # classical PCG
        cols.X.add_(cols.P * alpha)
        cols.R.sub_(AP * alpha)
        rn = torch.linalg.vector_norm(cols.R, dim=0)
        check = rn <= cols.tol  # done
        next_direction(cols, M, torch.zeros_like(check), run.it + 1, checked=~check)
    pending = cols.pending if cols.pending is not None else check.new_zeros(())
    healthy, any_check, bad_m = torch.stack([positive.all(), check.any(), pending]).tolist()
    # in the order they were computed: the exact-CG test is of this step's direction,
    # the classical one of the next direction, computed after this step's product
    if run.exact:
        cols.resolve_pending(bad_m)
    dead = None if healthy else curvature_failure(pAp, cols.P, AP, run.it, cols.idx, run.A, eps)
    fall_back = None  # why a mixed-precision run continues in full precision
    if dead is not None and run.products is not run.A and bool(dead.any()):
        fall_back = f"a curvature pᵀAp at iteration {run.it} (0-based) is within their rounding"
        dead = None  # those columns made no step (α = 0); they restart in full precision
    if not run.exact:
        cols.resolve_pending(bad_m)
    return settle(run, cols, rn, check, any_check, dead, fall_back)


def settle(
    run: CGRun,
    cols: ActiveColumns,
    rn: torch.Tensor,
    check: torch.Tensor,
    any_check: bool,
    dead: torch.Tensor | None,
    fall_back: str | None,
) -> torch.Tensor:
    """The end of :func:`step` after the update: replacements, the record, frozen columns.

    ``rn`` are the residual norms, ``check`` the columns to check (:func:`step`), ``dead``
    the broken-down columns (or ``None``), ``fall_back`` why a mixed-precision run goes on
    in full precision (or ``None``). Returns the restart mask of the remaining columns.
    """
    if run.exact:
        restart, stuck = replace_residuals(run.A, cols, rn, check, any_check, run.count)
        if run.products is not run.A:  # float64 recurrences: keep the direction
            restart = torch.zeros_like(restart)
            if fall_back is None and any_check and bool(stuck.any()):
                fall_back = stalled(rn, run.it)
            if fall_back is not None:
                rn, restart = full_precision_from_now(run, cols, fall_back)
                stuck, any_check = torch.zeros_like(stuck), True
        done = rn <= cols.tol if any_check else check
    else:  # no replacement: `check` is the mask of columns done
        done, restart = check, torch.zeros_like(check)
        stuck = restart
    run.it += 1
    _record(run, cols, rn)
    if any_check or dead is not None:
        stop = done | stuck if dead is None else done | stuck | dead
        if bool(stop.any()):
            run.freeze(cols, stop, done, stuck, dead)
            restart = restart[~stop]
    return restart


def _record(run: CGRun, cols: ActiveColumns, rn: torch.Tensor) -> None:
    """Append the residual norms of all columns (a stopped one repeats its last value)."""
    if cols.aliased:  # every column active, in order (`rn` is not written after this)
        run.history.append(rn)
    else:
        run.history.append(run.history[-1].clone().index_copy_(0, cols.idx, rn))
