"""Conjugate gradients: the front door :func:`cg` and the loop behind it, :func:`cg_core`.

The loop (per-column tolerances, a stop hook) is the one the kernel-system CG runs on too.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._core.stop_reason import StopReason
from ..linops.base import LinearOperator
from ..linops.checks import (
    as_preconditioner,
    as_system,
    check_nonnegative,
    check_optional_count,
)
from .breakdown import RELIABLE_UPDATE_FACTOR, ActiveColumns, next_direction
from .cg_fallback import full_precision_from_now, watch_condition
from .cg_info import CGInfo, squeezed
from .cg_run import CGRun
from .cg_step import host_direction, host_step, on_host, step
from .condition_monitor import ConditionMonitor
from .mixed_precision import low_precision_products

__all__ = ["RELIABLE_UPDATE_FACTOR", "StopHook", "cg", "cg_core"]

#: ``stop(iteration, norms) -> StopReason | None`` of :func:`cg_core` (its ``stop``).
StopHook = Callable[[int, torch.Tensor], StopReason | None]


def cg(
    A: object,
    b: object,
    x0: object = None,
    *,
    rtol: float = 1e-5,
    atol: float = 0.0,
    maxiter: int | None = None,
    M: object = None,
    callback: Callable[[torch.Tensor], object] | None = None,
    precision: str = "full",
) -> tuple[torch.Tensor, CGInfo]:
    r"""Solve ``A x = b`` for symmetric positive definite ``A`` by (preconditioned) CG.

    SciPy-compatible front door. Columns of a block right-hand side are solved
    simultaneously with their own step sizes ``α_j, β_j``; each product with ``A``
    multiplies the ``(n, k_active)`` block of still-active columns.

    Parameters
    ----------
    A
        Anything :func:`pnsolve.linops.as_linop` accepts, shape ``(n, n)``, SPD.
        Stored matrices must be symmetric (checked); matrix-free operators are
        taken to be symmetric.
    b
        Right-hand side, shape ``(n,)`` or ``(n, k)``; a tensor with ``A``'s dtype and
        device, or a NumPy array (converted with ``torch.as_tensor``; integer arrays
        take ``A``'s dtype). Must be finite.
    x0
        Initial guess with ``b``'s shape (default zero). Columns where ``b`` is zero
        return zero regardless of ``x0``.
    rtol, atol
        Column ``j`` stops at the first iteration where its residual satisfies
        ``‖r_j‖ ≤ max(rtol·‖b_j‖, atol)``; no minimum number of iterations. The
        test is always confirmed on the *true* residual ``b_j − A x_j``.
    maxiter
        Maximum number of iterations (default ``10·n``, as SciPy); ``0`` returns ``x0``.
    M
        Preconditioner approximating ``A⁻¹`` (SciPy convention; the search directions
        use ``z = M r``): a :class:`~pnsolve.linops.LinearOperator` (e.g. one of
        :mod:`pnsolve.preconditioners`), a tensor or anything ``as_linop`` accepts.
    callback
        ``callback(xk)`` after every iteration with a copy of the current iterate
        (shape of ``b``); returning ``True`` stops the run (``StopReason.CALLBACK``).
    precision
        ``"full"`` (default): every product in ``A``'s dtype. ``"mixed"``: the iteration
        products use ``A.to(torch.float32)`` while the iterate, residuals, step sizes and
        the true residuals that confirm convergence stay in float64 (``A`` and ``b``
        must be float64); with residual replacement this reaches ``rtol = 1e-10`` where
        float64 CG does (see Notes). ``"mixed-tf32"`` / ``"mixed-bf16"``: TensorFloat-32
        matmuls (CUDA) or bfloat16 products, only when asked (:data:`~pnsolve.krylov.
        mixed_precision.PRECISIONS`).

    Returns
    -------
    x : torch.Tensor
        Approximate solution, shape, dtype and device of ``b``.
    info : CGInfo
        Iterations, products, residual history, per-column convergence, stop reason.

    Raises
    ------
    ValueError
        On shape or device mismatches, NaN/Inf in ``b`` or ``x0``, a non-finite product
        ``A p`` (the message names the iteration), negative ``rtol``/``atol``/``maxiter``.
    TypeError
        On dtype mismatches or arguments of the wrong type.
    NotPositiveDefiniteError
        When a direction with negative curvature ``pᵀ A p < 0`` (beyond rounding)
        shows ``A`` is not SPD (``.iteration`` is the 0-based iteration), or when
        ``rᵀ M r ≤ 0`` shows ``M`` is not.

    Notes
    -----
    *Residual replacement.* The recursive residual ``r ← r − α A p`` drifts from the
    true residual (in float32 it reaches 1e-6 while ``b − A x`` stalls at 1e-4).
    Whenever a column's recursive residual meets its tolerance, the true residual is
    recomputed (one product for all such columns); the column stops only if the
    true residual meets the tolerance, otherwise ``r`` is replaced by it and CG
    restarts along ``z = M r``. In low precision (machine epsilon above 1e-10, e.g.
    float32) the residual is also replaced (and the direction restarted) whenever it
    has dropped by :data:`RELIABLE_UPDATE_FACTOR` since the last replacement
    (Sleijpen–van der Vorst "reliable updates"); a handful of extra products per
    solve. Keeping the old direction after a replacement was measured to diverge
    once the gap between recursive and true residual is large, so we restart. A
    column whose true residual fails to halve over three replacements in a row has
    hit the attainable accuracy of the working precision: it stops, unconverged
    (``StopReason.STAGNATION`` if that ends the run). Columns that did not converge
    get one final true-residual product at exit, so ``info.true_residual_norms`` is
    always exact. Hence
    ``products = (1 if x0 is given) + iterations + true_residual_checks``.

    *Mixed precision.* Products in float32 are accurate to about ``eps₃₂ ‖A‖‖p‖``, so
    the recursive residual drifts from the true one as in float32 CG; the same reliable
    updates correct it (keeping the direction), and the true residual ``b − A x`` is
    computed with ``A`` in float64, so the attainable accuracy is float64's. The cost is
    iterations: float32 products make CG lose orthogonality sooner (1.1× the float64
    iterations at κ ≈ 100, 1.5× at 5e3, 2.7× at 1e6). CG's own step sizes estimate
    ``κ(A)`` (the Lanczos tridiagonal, after 10, 20, 40, … iterations); beyond
    :func:`~pnsolve.krylov.condition_monitor.condition_limit` (5e3 for float32), after
    a stalled true residual, or at a curvature inside float32's rounding band, the run
    warns (``RuntimeWarning`` naming ``precision``) and restarts from its iterate with
    full-precision products (``info.precision == "full"``). ``true_residual_checks``
    counts the float64 products.

    The computation runs under ``torch.no_grad()``; it is not differentiable.
    """
    A, b, x0 = as_system(A, b, x0)
    products = low_precision_products(A, precision)
    rtol = check_nonnegative(rtol, "rtol")
    atol = check_nonnegative(atol, "atol")
    maxiter = check_optional_count(maxiter, "maxiter", 10 * A.shape[0])
    M = as_preconditioner(M, A)
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    vector = b.ndim == 1
    if vector and callback is not None:
        user_callback = callback

        def callback(X: torch.Tensor) -> object:
            return user_callback(X.squeeze(-1))

    B = b.unsqueeze(-1) if vector else b
    with torch.no_grad():
        tolerances = torch.clamp(rtol * torch.linalg.vector_norm(B, dim=0), min=atol)
        X, info = cg_core(
            A, B, x0, tolerances=tolerances, maxiter=maxiter, M=M, callback=callback,
            products=products,
        )  # fmt: skip
    if vector:
        return X.squeeze(-1), squeezed(info)
    return X, info


def cg_core(
    A: LinearOperator,
    B: torch.Tensor,
    x0: torch.Tensor | None = None,
    *,
    tolerances: torch.Tensor,
    maxiter: int,
    M: LinearOperator | None = None,
    callback: Callable[[torch.Tensor], object] | None = None,
    stop: StopHook | None = None,
    exact_residuals: bool = True,
    products: LinearOperator | None = None,
) -> tuple[torch.Tensor, CGInfo]:
    """The CG loop behind :func:`cg`, for pnsolve's solvers (arguments not converted).

    Column ``j`` stops once ``‖r_j‖ ≤ tolerances[j]``; products multiply the
    still-active columns only.

    Parameters
    ----------
    A
        SPD :class:`~pnsolve.linops.LinearOperator`, shape ``(n, n)``.
    B
        Right-hand sides, shape ``(n, k)``.
    x0
        Initial guess, shape ``(n, k)``; ``None``: zero (the residual ``B`` is free).
    tolerances
        Thresholds on ``‖r_j‖``, shape ``(k,)`` (:func:`cg`: ``max(rtol·‖b_j‖, atol)``).
    maxiter
        Most iterations; no preconditioner is applied when none runs.
    M, callback
        As in :func:`cg` (``callback`` receives the ``(n, k)`` iterate).
    stop
        :data:`StopHook` ``stop(iteration, norms)``, called before the first iteration
        and after each (after ``callback``) with the residual norms of all ``k`` columns
        (a stopped column repeats its last value), shape ``(k,)``; a
        :class:`~pnsolve.StopReason` ends the run with that reason (aggregate
        tolerances, budgets, history records).
    exact_residuals
        ``True`` (:func:`cg`): confirm convergence claims on the true residual, replace
        residuals periodically in low precision, stop stagnating columns, and spend one
        final product on the true residuals of unconverged columns (:func:`cg`, Notes).
        ``False``: classical PCG, as the kernel-system CG runs it: the recursive
        residual is trusted (no extra product; ``info.true_residual_norms`` holds the
        recursive norms), updates are unfused and each direction is computed before its
        column freezes (that solver's order, so its iterates are unchanged bit for bit).
    products
        Operator of the iteration products (default ``A``), e.g.
        :func:`~pnsolve.krylov.mixed_precision.low_precision_products`; the true
        residuals use ``A``. Needs ``exact_residuals``.

    Returns
    -------
    X : torch.Tensor
        Shape ``(n, k)``.
    info : CGInfo
        As for :func:`cg` (stop reason: the hook's, if it ended the run).
    """
    _check_core(A, B, x0, tolerances, maxiter)
    if products is not None and products is not A and not exact_residuals:
        raise ValueError("low-precision products need exact_residuals=True (true residuals)")
    run = CGRun.start(A, B, x0, tolerances, exact_residuals)
    if products is not None:
        run.products = products
    if run.products is not A:
        run.monitor = ConditionMonitor(B.shape[1], B)
    reason = None if stop is None else stop(0, run.history[-1])
    cols = None
    if reason is None and maxiter > 0 and not bool(run.converged.all()):
        cols = run.columns(M)
        reason = _iterate(run, cols, M, maxiter, callback, stop)
    return run.X, run.finish(cols, reason)


def _check_core(
    A: object, B: torch.Tensor, x0: torch.Tensor | None, tol: torch.Tensor, maxiter: int
) -> None:
    if not isinstance(A, LinearOperator) or B.ndim != 2 or A.shape != (B.shape[0],) * 2:
        raise ValueError(f"need a square LinearOperator A and B of shape (n, k), got {A!r}")
    if tol.shape != B.shape[1:] or (x0 is not None and x0.numel() != B.numel()):
        raise ValueError(f"tolerances must have shape ({B.shape[1]},) and x0 B's size")
    if isinstance(maxiter, bool) or not isinstance(maxiter, int) or maxiter < 0:
        raise ValueError(f"maxiter must be an int ≥ 0, got {maxiter!r}")


def _iterate(
    run: CGRun,
    cols: ActiveColumns,
    M: LinearOperator | None,
    maxiter: int,
    callback: Callable[[torch.Tensor], object] | None,
    stop: StopHook | None,
) -> StopReason | None:
    """Iterate until every column stopped, ``maxiter``, the callback or the stop hook."""
    try:
        while cols.idx.numel() and run.it < maxiter:
            restart = host_step(run, cols, M) if on_host(run) else step(run, cols, M)
            if callback is not None:
                if not cols.aliased:
                    run.X[:, cols.idx] = cols.X
                if callback(run.X.clone()) is True:
                    return StopReason.CALLBACK
            if stop is not None and (reason := stop(run.it, run.history[-1])) is not None:
                return reason
            if not cols.idx.numel() or not run.exact:
                continue
            if restart is None:  # an ordinary iteration of host_step
                host_direction(cols, M, run.it)
            else:
                beta = next_direction(cols, M, restart, run.it)
                if run.monitor is not None and watch_condition(run, cols, beta):
                    next_direction(cols, M, full_precision_from_now(run, cols)[1], run.it)
        return None
    except BaseException:
        cols.pending = None  # the error on its way out is the one to report
        raise
    finally:
        cols.resolve_pending()  # a direction computed last (unused) is still checked
