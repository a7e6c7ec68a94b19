"""Conjugate gradients with per-column stopping and residual replacement."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .._core.stop_reason import StopReason
from ..linops.base import LinearOperator
from ..linops.checks import (
    as_operand,
    as_preconditioner,
    as_square_operator,
    check_nonnegative,
    check_optional_count,
)
from .breakdown import check_preconditioner, curvature_failure
from .cg_info import CGInfo

__all__ = ["cg"]

#: Periodic ("reliable update") replacement factor: in low precision the recursive
#: residual of a column is replaced by the true one whenever it has dropped by this
#: factor since the last replacement.
RELIABLE_UPDATE_FACTOR = 1e-2


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

    The computation runs under ``torch.no_grad()``; it is not differentiable.
    """
    A = as_square_operator(A, "A")
    b = as_operand(b, A, "b")
    x0 = None if x0 is None else as_operand(x0, A, "x0")
    if x0 is not None and x0.shape != b.shape:
        raise ValueError(f"x0 must have the shape of b {tuple(b.shape)}, got {tuple(x0.shape)}")
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

    with torch.no_grad():
        X, info = _cg(A, b.unsqueeze(-1) if vector else b, x0, rtol, atol, maxiter, M, callback)
    if vector:
        X = X.squeeze(-1)
        info = _squeeze_info(info)
    return X, info


@dataclass
class _Columns:
    """The compacted working set of still-active columns (private to one run).

    ``X`` aliases the caller-visible solution while every column is active; after
    the first column stops, the working set holds copies and frozen columns are
    written back once.
    """

    idx: torch.Tensor  # (ka,) indices into the full block
    X: torch.Tensor  # (n, ka) iterates
    B: torch.Tensor  # (n, ka) right-hand sides
    R: torch.Tensor  # (n, ka) residuals
    P: torch.Tensor  # (n, ka) search directions
    tol: torch.Tensor  # (ka,) thresholds max(rtol‖b‖, atol)
    rz: torch.Tensor  # (ka,) rᵀ M r
    rmax: torch.Tensor  # (ka,) largest ‖r‖ since the last replacement
    best: torch.Tensor  # (ka,) smallest true residual of a failed convergence claim
    stalls: torch.Tensor  # (ka,) consecutive failed claims without halving ``best``
    aliased: bool

    def keep(self, mask: torch.Tensor) -> None:
        """Drop the columns where ``mask`` is False."""
        for name in ("X", "B", "R", "P"):
            setattr(self, name, getattr(self, name)[:, mask])
        for name in ("idx", "tol", "rz", "rmax", "best", "stalls"):
            setattr(self, name, getattr(self, name)[mask])
        self.aliased = False


def _cg(
    A: LinearOperator,
    B: torch.Tensor,
    x0: torch.Tensor | None,
    rtol: float,
    atol: float,
    maxiter: int,
    M: LinearOperator | None,
    callback: Callable[[torch.Tensor], object] | None,
) -> tuple[torch.Tensor, CGInfo]:
    n, k = B.shape
    count = _Counter()
    bnorm = torch.linalg.vector_norm(B, dim=0)
    tol = torch.clamp(rtol * bnorm, min=atol)
    zero_rhs = bnorm == 0
    X = torch.zeros_like(B) if x0 is None else x0.reshape(n, k).clone()
    if x0 is not None:
        X[:, zero_rhs] = 0
        R = B - count(A, X)
    else:
        R = B.clone()
    rn = torch.linalg.vector_norm(R, dim=0)
    converged = (rn <= tol) | zero_rhs
    broken = torch.zeros_like(converged)  # zero curvature at rounding level
    stagnated = torch.zeros_like(converged)
    col_iters = torch.zeros(k, dtype=torch.long, device=B.device)
    true_rn = rn.clone()
    history = [rn]

    idx = (~converged).nonzero().squeeze(1)
    aliased = idx.numel() == k
    R = R[:, idx]
    Z = R if M is None else M.matmat(R)
    rz = torch.linalg.vecdot(R, Z, dim=0)
    check_preconditioner(M, rz, 0)
    cols = _Columns(
        idx, X if aliased else X[:, idx], B[:, idx], R, Z.clone(), tol[idx], rz,
        rmax=rn[idx].clone(), best=torch.full_like(rz, math.inf),
        stalls=torch.zeros_like(idx), aliased=aliased,
    )  # fmt: skip
    reliable = torch.finfo(B.dtype).eps > 1e-10
    by_callback = False
    it = 0
    while cols.idx.numel() and it < maxiter:
        AP = count(A, cols.P)
        pAp = torch.linalg.vecdot(cols.P, AP, dim=0)
        healthy = bool(((pAp > 0) & (pAp < math.inf)).all())
        dead = None if healthy else curvature_failure(pAp, cols.P, AP, it, cols.idx)
        alpha = cols.rz / pAp if dead is None else torch.where(dead, 0.0, cols.rz / pAp)
        cols.X.addcmul_(cols.P, alpha)
        cols.R.addcmul_(AP, alpha, value=-1.0)
        rn = torch.linalg.vector_norm(cols.R, dim=0)
        restart, stuck = _replace_residuals(A, cols, rn, reliable, count)
        it += 1
        history.append(history[-1].clone().index_copy_(0, cols.idx, rn))
        done = rn <= cols.tol
        stop = done | stuck if dead is None else done | stuck | dead
        if bool(stop.any()):
            converged[cols.idx[done]] = True
            stagnated[cols.idx[stuck & ~done]] = True
            if dead is not None:
                broken[cols.idx[dead & ~done]] = True
            true_rn[cols.idx[done]] = rn[done]
            col_iters[cols.idx[stop]] = it
            if not cols.aliased:
                X[:, cols.idx[stop]] = cols.X[:, stop]
            cols.keep(~stop)
            restart = restart[~stop]
        if callback is not None:
            if not cols.aliased:
                X[:, cols.idx] = cols.X
            if callback(X.clone()) is True:
                by_callback = True
                break
        if not cols.idx.numel():
            break
        Z = cols.R if M is None else M.matmat(cols.R)
        rz = torch.linalg.vecdot(cols.R, Z, dim=0)
        check_preconditioner(M, rz, it)
        beta = torch.where(restart, 0.0, rz / cols.rz)
        cols.P.mul_(beta).add_(Z)
        cols.rz = rz

    # Exit: write back active columns; one true-residual product for unconverged ones.
    if cols.idx.numel():
        if not cols.aliased:
            X[:, cols.idx] = cols.X
        col_iters[cols.idx] = it
    open_cols = (~converged).nonzero().squeeze(1)
    if open_cols.numel():
        Rt = B[:, open_cols] - count(A, X[:, open_cols], check=True)
        true_rn[open_cols] = torch.linalg.vector_norm(Rt, dim=0)
    info = CGInfo(
        iterations=it,
        products=count.products,
        matvecs=count.matvecs,
        true_residual_checks=count.checks,
        residual_norms=torch.stack(history),
        true_residual_norms=true_rn,
        tolerances=tol,
        column_iterations=col_iters,
        converged=converged,
        stop_reason=_stop_reason(converged, zero_rhs, broken, stagnated, by_callback),
    )
    return X, info


class _Counter:
    """Counts products with ``A`` (and which of them were true-residual checks)."""

    def __init__(self) -> None:
        self.products = self.matvecs = self.checks = 0

    def __call__(self, A: LinearOperator, V: torch.Tensor, check: bool = False) -> torch.Tensor:
        self.products += 1
        self.matvecs += V.shape[1]
        self.checks += int(check)
        return A.matmat(V)


def _replace_residuals(
    A: LinearOperator, cols: _Columns, rn: torch.Tensor, reliable: bool, count: _Counter
) -> tuple[torch.Tensor, torch.Tensor]:
    """Recompute true residuals where needed; update ``cols.R`` and ``rn`` in place.

    Returns ``(restart, stuck)`` masks: columns whose residual was replaced and did
    not meet the tolerance (their direction restarts) and columns whose true residual
    stagnated (three replacements in a row without halving the best true residual).
    """
    claims = rn <= cols.tol
    check = claims | (rn <= RELIABLE_UPDATE_FACTOR * cols.rmax) if reliable else claims
    if not bool(check.any()):
        torch.maximum(cols.rmax, rn, out=cols.rmax)
        return claims, claims
    c = check.nonzero().squeeze(1)
    Rt = cols.B[:, c] - count(A, cols.X[:, c], check=True)
    cols.R[:, c] = Rt
    rn[c] = torch.linalg.vector_norm(Rt, dim=0)
    cols.rmax[c] = rn[c]
    torch.maximum(cols.rmax, rn, out=cols.rmax)
    restart = check & (rn > cols.tol)
    improved = rn < 0.5 * cols.best
    cols.stalls = torch.where(restart, torch.where(improved, 0, cols.stalls + 1), cols.stalls)
    cols.best = torch.where(restart, torch.minimum(cols.best, rn), cols.best)
    return restart, cols.stalls >= 3


def _stop_reason(
    converged: torch.Tensor,
    zero_rhs: torch.Tensor,
    broken: torch.Tensor,
    stagnated: torch.Tensor,
    by_callback: bool,
) -> StopReason:
    if bool(zero_rhs.all()):
        return StopReason.ZERO_RHS
    if bool(converged.all()):
        return StopReason.CONVERGED
    if by_callback:
        return StopReason.CALLBACK
    if not bool((converged | broken | stagnated).all()):
        return StopReason.MAX_ITERATIONS
    return StopReason.BREAKDOWN if bool(broken.any()) else StopReason.STAGNATION


def _squeeze_info(info: CGInfo) -> CGInfo:
    """Drop the column dimension of a single right-hand side's record."""
    return replace(
        info,
        residual_norms=info.residual_norms.squeeze(-1),
        true_residual_norms=info.true_residual_norms.squeeze(-1),
        tolerances=info.tolerances.squeeze(-1),
        column_iterations=info.column_iterations.squeeze(-1),
        converged=info.converged.squeeze(-1),
    )
