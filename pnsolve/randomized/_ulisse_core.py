"""The ULISSE loop: CG with Russian-roulette truncation after an early threshold.

Private: :func:`ulisse_trace` works on validated ``(n, k)`` blocks and also returns
the CG state at the truncation point (iterate, residual and, on request, the search
directions ``P`` and ``A P`` of every step taken), for building a belief from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._core import random as rnd
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
    track_variance: bool = True,
) -> UlisseTrace:
    """Run ULISSE on validated inputs ``A`` (n × n) and ``B`` (n, k); see ``ulisse``.

    Every step first draws the roulette for the estimates past the threshold, then
    takes one product with ``A`` on the columns that still have a live estimate.
    """
    run = _Run.start(A, B, X0, alpha, beta, M, n_estimates, keep_directions, track_variance)
    while True:
        running = run.roulette(generator)
        if not bool(running.any()) or run.it >= maxiter:
            break
        run.step(running.nonzero().squeeze(1))
    return run.trace()


@dataclass
class _Run:
    """The state of one ULISSE run on ``k`` columns with ``E`` estimates (updated in place)."""

    A: LinearOperator
    M: LinearOperator | None
    alpha: float
    beta: float
    keep_directions: bool
    track_variance: bool
    X: torch.Tensor  # (n, k) the plain CG iterate
    R: torch.Tensor  # (n, k) the recursive residual
    P: torch.Tensor  # (n, k) search directions
    rz: torch.Tensor  # (k,) rᵀ M r
    rn: torch.Tensor  # (k,) residual norms
    conv_tol: torch.Tensor  # (k,)
    zero_rhs: torch.Tensor  # (k,) bool
    done: torch.Tensor  # (k,) bool: columns whose CG has converged
    broken: torch.Tensor  # (k,) bool
    started: torch.Tensor  # (k,) bool: columns in the roulette phase
    threshold_iters: torch.Tensor  # (k,) long
    alive: torch.Tensor  # (E, k) bool: estimates still accumulating increments
    by_roulette: torch.Tensor  # (E, k) bool
    est_converged: torch.Tensor  # (E, k) bool
    J: torch.Tensor  # (E, k) long: roulette steps taken
    W: torch.Tensor  # (E, k) float64: current weight ∏ w_r
    Xt: torch.Tensor  # (E, n, k) the estimates
    U: torch.Tensor  # (E, n, k) Σ (W_j − 1) δ_j, for the variance
    V: torch.Tensor  # (E, k) variance estimates
    history: list[torch.Tensor]
    dirs: list[torch.Tensor]
    adirs: list[torch.Tensor]
    products: int
    matvecs: int
    it: int = 0

    @classmethod
    def start(
        cls,
        A: LinearOperator,
        B: torch.Tensor,
        X0: torch.Tensor | None,
        alpha: float,
        beta: float,
        M: LinearOperator | None,
        n_estimates: int,
        keep_directions: bool,
        track_variance: bool = True,
    ) -> _Run:
        """The state before the first step (one product when ``X0`` is given)."""
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
        done = (rn <= conv_tol) | zero_rhs
        alive = (~done).expand(E, k).clone()
        Z = R if M is None else M.matmat(R)
        return cls(
            A, M, alpha, beta, keep_directions, track_variance, X, R, P=Z.clone(),
            rz=torch.linalg.vecdot(R, Z, dim=0), rn=rn, conv_tol=conv_tol, zero_rhs=zero_rhs,
            # the threshold is checked after each step, as in Algorithm 1 of Filippone &
            # Engler (2015): at least one deterministic CG step (l ≥ 1), even when
            # ‖b − A x0‖ ≤ alpha
            done=done, broken=torch.zeros_like(done), started=torch.zeros_like(done),
            threshold_iters=torch.zeros(k, dtype=torch.long, device=dev),
            alive=alive, by_roulette=torch.zeros_like(alive),
            est_converged=done.expand(E, k).clone(),
            J=torch.zeros(E, k, dtype=torch.long, device=dev),
            W=torch.ones(E, k, dtype=torch.float64, device=dev),
            Xt=X.expand(E, n, k).clone(), U=torch.zeros(E, n, k, dtype=dt, device=dev),
            V=torch.zeros(E, k, dtype=dt, device=dev), history=[rn.clone()], dirs=[], adirs=[],
            products=products, matvecs=matvecs,
        )  # fmt: skip

    def roulette(self, generator: torch.Generator) -> torch.Tensor:
        """Draw the roulette; return the columns that still have a live estimate, ``(k,)``.

        Past the threshold, step ``r`` is taken with probability ``1/w_r``.
        """
        E, k = self.alive.shape
        u = rnd.rand((E, k), generator=generator, dtype=torch.float64, device=self.J.device)
        r = (self.J + 1).to(torch.float64)
        playing = self.alive & self.started
        go = playing & ((1.0 - u) < torch.exp(-self.beta * r))
        self.by_roulette |= playing & ~go
        self.alive &= ~(playing & ~go)
        self.J += go.long()
        self.W = torch.where(go, self.W * torch.exp(self.beta * r), self.W)
        return self.alive.any(0)

    def step(self, idx: torch.Tensor) -> None:
        """One CG step on the columns ``idx`` (one product with ``A``).

        When every column steps (the common case) the updates work on views of the
        state instead of gathering and scattering the columns.
        """
        k = self.X.shape[1]
        cols: torch.Tensor | slice = slice(None) if idx.numel() == k else idx
        Pa = self.P[:, cols]
        APa = self.A.matmat(Pa)
        self.products, self.matvecs = self.products + 1, self.matvecs + idx.numel()
        pAp = torch.linalg.vecdot(Pa, APa, dim=0)
        healthy = bool(((pAp > 0) & torch.isfinite(pAp)).all())
        dead = None if healthy else curvature_failure(pAp, Pa, APa, self.it, idx)
        rz = self.rz[cols]
        step = rz / pAp if dead is None else torch.where(dead, 0.0, rz / pAp)
        delta = Pa * step  # the CG increment α_i p_i
        self.X[:, cols] += delta
        R = self.R[:, cols] - APa * step
        self.R[:, cols] = R
        alive = self.alive[:, cols]
        Wa = torch.where(alive, self.W[:, cols], 0.0).to(self.X.dtype)  # (E, ka)
        self.Xt[:, :, cols] += Wa[:, None, :] * delta
        if self.track_variance:
            _update_variance(self.U, self.V, cols, Wa, alive, delta)
        if self.keep_directions:
            self.dirs.append(_scatter(Pa, idx, k))
            self.adirs.append(_scatter(APa, idx, k))
        self.it += 1
        started = self.started[cols]
        self.threshold_iters[cols] += (~started).long()
        rn_a = torch.linalg.vector_norm(R, dim=0)
        self.rn = rn_a if isinstance(cols, slice) else self.rn.index_copy(0, idx, rn_a)
        self.history.append(self.rn)
        self.started[cols] = started | (rn_a <= self.alpha)
        fin = rn_a <= self.conv_tol[cols]
        if dead is not None:
            fin |= dead
            self.broken[idx[dead]] = True
        if bool(fin.any()):
            f = idx[fin]
            self.done[f] = True
            self.est_converged[:, f] |= self.alive[:, f]
            self.alive[:, f] = False
            self._next_directions(idx[~fin])
        else:
            self._next_directions(idx, cols)

    def _next_directions(
        self, cont: torch.Tensor, cols: torch.Tensor | slice | None = None
    ) -> None:
        """``p ← M r + β p`` on the columns ``cont`` that go on (``cols``: the same, or all)."""
        if cont.numel():
            c = cont if cols is None else cols
            Rc = self.R[:, c]
            Zc = Rc if self.M is None else self.M.matmat(Rc)
            rz_new = torch.linalg.vecdot(Rc, Zc, dim=0)
            check_preconditioner(self.M, rz_new, self.it)
            self.P[:, c] = Zc + self.P[:, c] * (rz_new / self.rz[c])
            self.rz[c] = rz_new

    def trace(self) -> UlisseTrace:
        """The run's result."""
        jmax = int(self.J.max()) if self.J.numel() else 0
        j = torch.arange(1, jmax + 1, dtype=torch.float64, device=self.J.device)
        info = UlisseInfo(
            iterations=self.it,
            products=self.products,
            matvecs=self.matvecs,
            threshold_iterations=self.threshold_iters,
            roulette_steps=self.J,
            weights=torch.exp(self.beta * j * (j + 1) / 2),
            by_roulette=self.by_roulette,
            converged=self.est_converged,
            residual_norms=torch.stack(self.history),
            variance_estimates=self.V if self.track_variance else torch.full_like(self.V, math.nan),
            cg_iterate=self.X,
            stop_reason=_stop_reason(self.zero_rhs, self.alive, self.broken, self.by_roulette),
        )
        keep = self.keep_directions
        return UlisseTrace(
            estimates=self.Xt,
            iterate=self.X,
            residual=self.R,
            directions=torch.stack(self.dirs) if keep else None,
            operator_directions=torch.stack(self.adirs) if keep else None,
            info=info,
        )


def _update_variance(
    U: torch.Tensor,
    V: torch.Tensor,
    idx: torch.Tensor | slice,
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
