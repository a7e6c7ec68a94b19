"""The ULISSE loop: CG with Russian-roulette truncation after an early threshold.

Private: :func:`ulisse_trace` works on validated ``(n, k)`` blocks and also returns
the CG state at the truncation point (iterate, residual and, on request, the search
directions ``P`` and ``A P`` of every step taken), for building a belief from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.stop_reason import StopReason
from ..krylov.breakdown import check_preconditioner, curvature_failure
from ..linops.base import LinearOperator
from .ulisse_info import UlisseInfo

__all__ = ["CONVERGED_FACTOR", "UlisseTrace", "ulisse_trace"]

#: CG counts as converged (every later increment is zero to working precision) once
#: its recursive residual satisfies ``‖r‖ ≤ CONVERGED_FACTOR · eps · ‖b‖``.
CONVERGED_FACTOR = 10.0


@dataclass(frozen=True)
class UlisseTrace:
    """Everything one ULISSE run produced, for a block ``B`` of shape ``(n, k)``.

    Attributes
    ----------
    estimates
        The unbiased estimates, shape ``(E, n, k)``.
    iterate
        The plain (unweighted) CG iterate ``x0 + Σ_i α_i p_i`` at truncation, ``(n, k)``.
    residual
        The recursive CG residual at truncation, ``(n, k)``.
    directions
        Search directions of the steps taken, shape ``(steps, n, k)`` (zero columns
        where a column was not running), or None unless ``keep_directions``.
    operator_directions
        ``A`` times ``directions``, same shape, or None.
    info
        The run's record with explicit ``(E, k)`` / ``(k,)`` shapes.
    """

    estimates: torch.Tensor
    iterate: torch.Tensor
    residual: torch.Tensor
    directions: torch.Tensor | None
    operator_directions: torch.Tensor | None
    info: UlisseInfo


def ulisse_trace(
    A: LinearOperator,
    B: torch.Tensor,
    X0: torch.Tensor | None,
    *,
    alpha: float,
    beta: float,
    generator: torch.Generator,
    maxiter: int,
    M: LinearOperator | None = None,
    n_estimates: int = 1,
    keep_directions: bool = False,
) -> UlisseTrace:
    """Run ULISSE on validated inputs ``A`` (n × n) and ``B`` (n, k); see ``ulisse``.

    Every step first draws the roulette for the estimates past the threshold, then
    takes one product with ``A`` on the columns that still have a live estimate.
    """
    n, k = B.shape
    E, dev, dt = n_estimates, B.device, B.dtype
    products = matvecs = 0
    bnorm = torch.linalg.vector_norm(B, dim=0)
    zero_rhs = bnorm == 0
    X = torch.zeros_like(B) if X0 is None else X0.clone()
    X[:, zero_rhs] = 0
    if X0 is not None:
        R = B - A.matmat(X)
        products, matvecs = 1, k
    else:
        R = B.clone()
    rn = torch.linalg.vector_norm(R, dim=0)
    conv_tol = CONVERGED_FACTOR * torch.finfo(dt).eps * bnorm
    done = (rn <= conv_tol) | zero_rhs  # columns whose CG has converged
    broken = torch.zeros_like(done)
    started = rn <= alpha  # columns in the roulette phase
    threshold_iters = torch.zeros(k, dtype=torch.long, device=dev)
    alive = (~done).expand(E, k).clone()  # estimates still accumulating increments
    by_roulette = torch.zeros_like(alive)
    est_converged = done.expand(E, k).clone()
    J = torch.zeros(E, k, dtype=torch.long, device=dev)  # roulette steps taken
    W = torch.ones(E, k, dtype=torch.float64, device=dev)  # current weight ∏ w_r
    Xt = X.expand(E, n, k).clone()
    U = torch.zeros(E, n, k, dtype=dt, device=dev)  # Σ (W_j − 1) δ_j, for the variance
    V = torch.zeros(E, k, dtype=dt, device=dev)
    Z = R if M is None else M.matmat(R)
    rz = torch.linalg.vecdot(R, Z, dim=0)
    P = Z.clone()
    history = [rn.clone()]
    dirs: list[torch.Tensor] = []
    adirs: list[torch.Tensor] = []
    it = 0
    while True:
        # Russian roulette: past the threshold, step r is taken with probability 1/w_r.
        u = torch.rand((E, k), generator=generator, dtype=torch.float64, device=generator.device)
        r = (J + 1).to(torch.float64)
        playing = alive & started
        go = playing & ((1.0 - u.to(dev)) < torch.exp(-beta * r))
        by_roulette |= playing & ~go
        alive &= ~(playing & ~go)
        J += go.long()
        W = torch.where(go, W * torch.exp(beta * r), W)
        running = alive.any(0)
        if not bool(running.any()) or it >= maxiter:
            break
        idx = running.nonzero().squeeze(1)
        Pa = P[:, idx]
        APa = A.matmat(Pa)
        products, matvecs = products + 1, matvecs + idx.numel()
        pAp = torch.linalg.vecdot(Pa, APa, dim=0)
        healthy = bool(((pAp > 0) & torch.isfinite(pAp)).all())
        dead = None if healthy else curvature_failure(pAp, Pa, APa, it, idx)
        step = rz[idx] / pAp if dead is None else torch.where(dead, 0.0, rz[idx] / pAp)
        delta = Pa * step  # the CG increment α_i p_i
        X[:, idx] += delta
        R[:, idx] -= APa * step
        Wa = torch.where(alive[:, idx], W[:, idx], 0.0).to(dt)  # (E, ka)
        Xt[:, :, idx] += Wa[:, None, :] * delta
        _update_variance(U, V, idx, Wa, alive[:, idx], delta)
        if keep_directions:
            dirs.append(_scatter(Pa, idx, k))
            adirs.append(_scatter(APa, idx, k))
        it += 1
        threshold_iters[idx] += (~started[idx]).long()
        rn_a = torch.linalg.vector_norm(R[:, idx], dim=0)
        rn = rn.index_copy(0, idx, rn_a)
        history.append(rn)
        started[idx] |= rn_a <= alpha
        fin = rn_a <= conv_tol[idx] if dead is None else (rn_a <= conv_tol[idx]) | dead
        if dead is not None:
            broken[idx[dead]] = True
        if bool(fin.any()):
            f = idx[fin]
            done[f] = True
            est_converged[:, f] |= alive[:, f]
            alive[:, f] = False
        cont = idx[~fin]
        if cont.numel():
            Rc = R[:, cont]
            Zc = Rc if M is None else M.matmat(Rc)
            rz_new = torch.linalg.vecdot(Rc, Zc, dim=0)
            check_preconditioner(M, rz_new, it)
            P[:, cont] = Zc + P[:, cont] * (rz_new / rz[cont])
            rz[cont] = rz_new

    jmax = int(J.max()) if J.numel() else 0
    j = torch.arange(1, jmax + 1, dtype=torch.float64, device=dev)
    info = UlisseInfo(
        iterations=it,
        products=products,
        matvecs=matvecs,
        threshold_iterations=threshold_iters,
        roulette_steps=J,
        weights=torch.exp(beta * j * (j + 1) / 2),
        by_roulette=by_roulette,
        converged=est_converged,
        residual_norms=torch.stack(history),
        variance_estimates=V,
        stop_reason=_stop_reason(zero_rhs, alive, broken, by_roulette),
    )
    return UlisseTrace(
        estimates=Xt,
        iterate=X,
        residual=R,
        directions=torch.stack(dirs) if keep_directions else None,
        operator_directions=torch.stack(adirs) if keep_directions else None,
        info=info,
    )


def _update_variance(
    U: torch.Tensor,
    V: torch.Tensor,
    idx: torch.Tensor,
    Wa: torch.Tensor,
    alive_a: torch.Tensor,
    delta: torch.Tensor,
) -> None:
    """Add step ``k``'s terms of the unbiased variance estimate (in place).

    ``x̃ − x* = Σ_j (W_j I_j − 1) δ_j`` with ``P(I_j) = 1/W_j`` gives
    ``E‖x̃ − x*‖² = Σ_{j,k} (W_min(j,k) − 1) δ_jᵀδ_k``; term ``(j, k)`` is seen with
    probability ``1/W_max(j,k)``, so ``Σ_{j,k seen} W_max (W_min − 1) δ_jᵀδ_k`` is
    unbiased. Step ``k`` adds ``W_k (W_k − 1)‖δ_k‖² + 2 W_k Σ_{j<k} (W_j − 1) δ_jᵀδ_k``.
    """
    Ua = U[:, :, idx]
    cross = (Ua * delta).sum(1)
    V[:, idx] += Wa * (Wa - 1) * delta.square().sum(0) + 2 * Wa * cross
    U[:, :, idx] = Ua + torch.where(alive_a, Wa - 1, 0.0)[:, None, :] * delta


def _scatter(Va: torch.Tensor, idx: torch.Tensor, k: int) -> torch.Tensor:
    out = Va.new_zeros(Va.shape[0], k)
    out[:, idx] = Va
    return out


def _stop_reason(
    zero_rhs: torch.Tensor, alive: torch.Tensor, broken: torch.Tensor, by_roulette: torch.Tensor
) -> StopReason:
    if bool(zero_rhs.all()):
        return StopReason.ZERO_RHS
    if bool(alive.any()):
        return StopReason.MAX_ITERATIONS
    if bool(broken.any()):
        return StopReason.BREAKDOWN
    if bool(by_roulette.any()):
        return StopReason.TRUNCATED
    return StopReason.CONVERGED
