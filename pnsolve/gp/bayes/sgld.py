"""Preconditioned stochastic gradient Langevin dynamics.

Welling & Teh (2011), as used by Filippone & Engler (2015), §2.1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..._core import random as rnd
from ..._core.errors import NotPositiveDefiniteError
from ..._core.validation import check_positive_int, require_generator
from .chain_sampler import ChainSampler

__all__ = ["SGLD", "SGLDResult", "SGLDState", "step_schedule"]


def step_schedule(
    start: float, end: float, iterations: int, gamma: float = 1.0
) -> tuple[float, float]:
    """``(a, b)`` of ``ε_t = a (b + t)^(−γ)`` with ``ε_0 = start`` and ``ε_{T−1} = end``.

    Parameters
    ----------
    start, end
        ``ε_0 > ε_{T−1} > 0`` (Filippone & Engler 2015 use 1e-1 and 1e-4).
    iterations
        ``T ≥ 2``.
    gamma
        Decay exponent ``γ ∈ (0.5, 1]`` (the paper's: 1), so that ``Σ ε_t = ∞`` and
        ``Σ ε_t² < ∞`` (the paper's eq. 6).
    """
    if not (0 < end < start < math.inf):
        raise ValueError(f"step sizes must satisfy 0 < end < start, got start={start}, end={end}")
    if not (0.5 < gamma <= 1.0):
        raise ValueError(f"gamma must be in (0.5, 1], got {gamma}")
    if iterations < 2:
        raise ValueError(f"iterations must be at least 2 for a schedule, got {iterations}")
    b = (iterations - 1) / ((start / end) ** (1.0 / gamma) - 1.0)
    return start * b**gamma, b


@dataclass
class SGLDResult:
    """What :meth:`SGLD.run` produced.

    Attributes
    ----------
    samples
        Every iterate ``θ_1, …, θ_T``, float64, shape ``(T, p)``.
    step_sizes
        ``ε_t`` used at each iteration, shape ``(T,)``.
    frozen_at
        Iteration at which the step size was frozen (the Langevin phase began), or
        ``None`` if the ratio of Filippone & Engler (2015), eq. 7, never fell below the
        threshold.
    ratios
        ``(t, (ε_t/4) λmax(M^½ V M^½))`` at every check (every ``variance_batch``
        iterations).
    products
        Block products with ``K̂`` spent by the gradient estimates.
    """

    samples: torch.Tensor
    step_sizes: torch.Tensor
    frozen_at: int | None
    ratios: list[tuple[int, float]] = field(default_factory=list)
    products: int = 0

    @property
    def kept(self) -> torch.Tensor:
        """Samples after the step size froze, shape ``(T − frozen_at, p)`` (empty if never)."""
        if self.frozen_at is None:
            return self.samples[:0]
        return self.samples[self.frozen_at :]


@dataclass
class SGLDState:
    """The resumable state of one SGLD run (see :meth:`SGLD.advance`).

    Attributes
    ----------
    theta
        The current iterate, shape ``(p,)``.
    t
        Steps taken.
    iterations
        Steps planned (the schedule's ``T``).
    schedule
        ``(a, b)`` of ``ε_t = a (b + t)^(−γ)``.
    samples, step_sizes
        Preallocated ``(T, p)`` and ``(T,)``; rows ``< t`` are filled.
    frozen, frozen_at
        The frozen step size and the step count when it froze (``None`` before).
    batch
        Gradient estimates since the last check of the freezing ratio.
    ratios
        ``(t, ratio)`` at every check.
    products
        Block products spent so far.
    """

    theta: torch.Tensor
    t: int
    iterations: int
    schedule: tuple[float, float]
    samples: torch.Tensor
    step_sizes: torch.Tensor
    frozen: float | None = None
    frozen_at: int | None = None
    batch: list[torch.Tensor] = field(default_factory=list)
    ratios: list[tuple[int, float]] = field(default_factory=list)
    products: int = 0

    def result(self) -> SGLDResult:
        """The run so far as an :class:`SGLDResult`."""
        return SGLDResult(
            self.samples[: self.t].clone(),
            self.step_sizes[: self.t].clone(),
            self.frozen_at,
            list(self.ratios),
            self.products,
        )


class SGLD(ChainSampler[SGLDState, SGLDResult]):
    """Preconditioned SGLD for ``p(θ | y) ∝ p(y | θ) p(θ)`` with unbiased gradient estimates.

    ``θ_{t+1} = θ_t + (ε_t/2) M (g̃(θ_t) + ∇ log p(θ_t)) + η_t``, ``η_t ~ N(0, ε_t M)``
    (Filippone & Engler 2015, eq. 5), with ``ε_t = a (b + t)^(−γ)`` decreasing from
    ``step_start`` to ``step_end`` over the run. Every ``variance_batch`` iterations the
    sampling covariance ``V`` of the last batch of gradient estimates gives the ratio of
    the gradient noise to the injected noise, ``(ε_t/4) λmax(M^½ V M^½)`` (the paper's
    eq. 7); once it falls below ``freeze_threshold`` the step size is frozen (the
    paper's threshold: 0.002) and the chain is taken to be in its Langevin phase: later
    iterates are the samples.

    Parameters
    ----------
    gradient
        ``gradient(θ)`` → an object with ``.grad`` (shape ``(p,)``) and ``.products``,
        e.g. :class:`~pnsolve.gp.bayes.LogMarginalGradient`: an unbiased estimate of
        ``∇ log p(y | θ)``.
    log_prior_grad
        ``∇ log p(θ)``, e.g. ``LogHyperparameters.log_prior_grad``.
    M
        Preconditioner, SPD ``(p, p)`` (the paper's: the inverse negative Hessian of the log
        posterior at the MAP of a subset, :func:`~pnsolve.gp.bayes.laplace_preconditioner`).
    step_start, step_end, gamma
        The schedule (the paper's: 1e-1 → 1e-4, γ = 1).
    freeze_threshold
        Freeze ``ε_t`` once the ratio of eq. 7 is below it (the paper's: 0.002); ``0`` never
        freezes (plain decreasing-step SGLD).
    variance_batch
        Gradients per estimate of ``V`` (the paper's: 100).

    Notes
    -----
    The chain lives on ``M``'s device (put ``M`` on the data's): ``theta0`` is moved
    there, the samples are kept there, and the injected noise is drawn on the
    generator's device and moved there (a CPU generator gives the same chain on every
    device).
    """

    def __init__(
        self,
        gradient: Callable[[torch.Tensor], object],
        log_prior_grad: Callable[[torch.Tensor], torch.Tensor],
        M: torch.Tensor,
        *,
        step_start: float = 1e-1,
        step_end: float = 1e-4,
        gamma: float = 1.0,
        freeze_threshold: float = 0.002,
        variance_batch: int = 100,
    ) -> None:
        M = torch.as_tensor(M, dtype=torch.float64)
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            raise ValueError(f"M must be a square (p, p) matrix, got shape {tuple(M.shape)}")
        M = 0.5 * (M + M.mT)
        L, info = torch.linalg.cholesky_ex(M)
        if int(info) != 0 or not bool(torch.isfinite(M).all()):
            raise ValueError("M must be symmetric positive definite (its Cholesky factor failed)")
        self.gradient, self.log_prior_grad = gradient, log_prior_grad
        self.M, self.L = M, L
        self.step_start, self.step_end, self.gamma = (
            float(step_start),
            float(step_end),
            float(gamma),
        )
        if not (0 < self.step_end < self.step_start):
            raise ValueError(f"need 0 < step_end < step_start, got {step_start}, {step_end}")
        if not (math.isfinite(freeze_threshold) and freeze_threshold >= 0):
            raise ValueError(f"freeze_threshold must be ≥ 0, got {freeze_threshold!r}")
        self.freeze_threshold = float(freeze_threshold)
        self.variance_batch = check_positive_int(variance_batch, "variance_batch")

    def noise_ratio(self, step: float, gradients: torch.Tensor) -> float:
        """``(ε/4) λmax(M^½ V M^½)``, ``V`` the sampling covariance of ``gradients`` ``(B, p)``."""
        V = torch.cov(gradients.mT).reshape(self.M.shape)
        S = self.L.mT @ V @ self.L  # similar to M^½ V M^½ (same eigenvalues)
        return 0.25 * step * float(torch.linalg.eigvalsh(0.5 * (S + S.mT)).max())

    def start(self, theta0: torch.Tensor, iterations: int) -> SGLDState:
        """A fresh run of ``iterations`` steps from ``theta0`` (shape ``(p,)``)."""
        iterations = check_positive_int(iterations, "iterations")
        a, b = step_schedule(self.step_start, self.step_end, iterations, self.gamma)
        theta = torch.as_tensor(theta0, dtype=torch.float64, device=self.M.device).clone()
        p = self.M.shape[0]
        if theta.shape != (p,) or not bool(torch.isfinite(theta).all()):
            raise ValueError(f"theta0 must be finite with shape ({p},), got {theta}")
        return SGLDState(
            theta=theta,
            t=0,
            iterations=iterations,
            schedule=(a, b),
            samples=self.M.new_empty(iterations, p),
            step_sizes=self.M.new_empty(iterations),
        )

    def advance(
        self,
        state: SGLDState,
        count: int,
        generator: torch.Generator,
        *,
        callback: Callable[[int, torch.Tensor], object] | None = None,
    ) -> SGLDState:
        """Take up to ``count`` more steps (in place; stops at ``state.iterations``).

        A run cut into pieces by :meth:`advance` is identical to one call with the same
        generator: the state holds everything the next step needs (checkpoints save it
        with the generator's and the gradient estimator's states).
        """
        generator = require_generator(generator)
        a, b = state.schedule
        p = self.M.shape[0]
        stop = min(state.iterations, state.t + check_positive_int(count, "count"))
        while state.t < stop:
            t = state.t
            eps = state.frozen if state.frozen is not None else a * (b + t) ** (-self.gamma)
            try:
                est = self.gradient(state.theta)
            except (NotPositiveDefiniteError, ArithmeticError) as e:
                raise ArithmeticError(
                    f"SGLD left the region where K̂(θ) is numerically positive definite at "
                    f"iteration {t}, θ = {state.theta.tolist()} ({type(e).__name__}: {e}); "
                    "heavy-tailed gradient "
                    "estimates (ULISSE's variance grows with κ(K̂)) can throw a chain far: "
                    "lower the early threshold alpha, the first step size, or use "
                    "gradient='cg'"
                ) from e
            g = est.grad  # type: ignore[attr-defined]
            state.products += int(getattr(est, "products", 0))
            if not bool(torch.isfinite(g).all()):
                raise ArithmeticError(f"the gradient estimate at iteration {t} is not finite: {g}")
            drift = 0.5 * eps * (self.M @ (g + self.log_prior_grad(state.theta)))
            z = rnd.randn(p, generator=generator, dtype=torch.float64, device=self.M.device)
            state.theta = state.theta + drift + math.sqrt(eps) * (self.L @ z)
            state.samples[t], state.step_sizes[t] = state.theta, eps
            state.t = t + 1
            if state.frozen is None and self.freeze_threshold > 0:
                state.batch.append(g)
                if len(state.batch) == self.variance_batch:
                    ratio = self.noise_ratio(eps, torch.stack(state.batch))
                    state.ratios.append((t, ratio))
                    state.batch = []
                    if ratio < self.freeze_threshold:
                        state.frozen, state.frozen_at = eps, t + 1
            if callback is not None:
                callback(t, state.theta)
        return state

    def _result(self, state: SGLDState) -> SGLDResult:
        return state.result()
