"""Random-walk Metropolis–Hastings: the exact-likelihood reference sampler.

As in Filippone & Engler (2015), §5.1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..._core import random as rnd
from ..._core.validation import check_positive_int, require_generator
from .chain_sampler import ChainSampler

__all__ = ["MHState", "MetropolisHastings"]


@dataclass
class MHState:
    """The resumable state of one Metropolis–Hastings run.

    Attributes
    ----------
    theta, log_density
        The current point ``(p,)`` and its log target density.
    t, iterations
        Steps taken and planned.
    scale
        Current proposal scale ``s`` (proposals ``θ + s L z``, ``L Lᵀ = Σ``).
    samples
        ``(T, p)``; rows ``< t`` are filled.
    accepted
        ``(T,)`` bool; whether each step's proposal was accepted.
    window
        Acceptances in the current adaptation window.
    """

    theta: torch.Tensor
    log_density: float
    t: int
    iterations: int
    scale: float
    samples: torch.Tensor
    accepted: torch.Tensor
    window: list[bool] = field(default_factory=list)

    def acceptance_rate(self, start: int = 0) -> float:
        """Fraction of accepted proposals among steps ``start … t − 1``."""
        part = self.accepted[start : self.t]
        return float(part.double().mean()) if part.numel() else math.nan


class MetropolisHastings(ChainSampler[MHState, MHState]):
    """Random-walk Metropolis–Hastings on a log density (the reference of Filippone & Engler 2015).

    Proposals ``θ' = θ + s L z`` with ``z ~ N(0, I)`` and ``L Lᵀ = Σ`` (e.g. the Laplace
    covariance ``M``), accepted with probability ``min(1, p(θ')/p(θ))``. During the
    first ``adapt`` iterations, the ``k``-th window of ``adapt_every`` steps multiplies
    the scale ``s`` by ``exp(4 (rate − centre) / √k)`` (a Robbins–Monro step towards
    the centre of ``acceptance_range``, the paper's: 0.2–0.4); afterwards ``s`` is fixed, so
    the chain is a valid MH chain and its draws after ``burn_in`` (≥ ``adapt``) are
    the samples.

    Parameters
    ----------
    log_density
        ``log p(θ)`` up to a constant; ``-inf`` outside the support.
    proposal_cov
        ``Σ``, SPD ``(p, p)``.
    scale
        Initial ``s`` (default ``2.38 / √p``, the optimal random-walk scale for
        Gaussian targets).
    adapt
        Iterations of the adaptive phase.
    adapt_every
        Window length for the acceptance rate.
    acceptance_range
        Target acceptance window.

    Notes
    -----
    The chain lives on ``proposal_cov``'s device (``theta0`` is moved there); proposals
    are drawn on the generator's device and moved there.
    """

    def __init__(
        self,
        log_density: Callable[[torch.Tensor], float],
        proposal_cov: torch.Tensor,
        *,
        scale: float | None = None,
        adapt: int = 10_000,
        adapt_every: int = 100,
        acceptance_range: tuple[float, float] = (0.2, 0.4),
    ) -> None:
        cov = torch.as_tensor(proposal_cov, dtype=torch.float64)
        if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
            raise ValueError(f"proposal_cov must be (p, p), got shape {tuple(cov.shape)}")
        L, info = torch.linalg.cholesky_ex(0.5 * (cov + cov.mT))
        if int(info) != 0:
            raise ValueError("proposal_cov must be symmetric positive definite")
        lo, hi = acceptance_range
        if not (0 < lo < hi < 1):
            raise ValueError(
                f"acceptance_range must satisfy 0 < lo < hi < 1, got {acceptance_range}"
            )
        self.log_density, self.L = log_density, L
        p = cov.shape[0]
        self.scale = 2.38 / math.sqrt(p) if scale is None else float(scale)
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be positive, got {scale!r}")
        if isinstance(adapt, bool) or not isinstance(adapt, int) or adapt < 0:
            raise ValueError(f"adapt must be a non-negative int, got {adapt!r}")
        self.adapt = adapt
        self.adapt_every = check_positive_int(adapt_every, "adapt_every")
        self.acceptance_range = (float(lo), float(hi))

    def start(self, theta0: torch.Tensor, iterations: int) -> MHState:
        """A fresh run of ``iterations`` steps from ``theta0`` (finite log density)."""
        iterations = check_positive_int(iterations, "iterations")
        theta = torch.as_tensor(theta0, dtype=torch.float64, device=self.L.device).clone()
        p = self.L.shape[0]
        if theta.shape != (p,) or not bool(torch.isfinite(theta).all()):
            raise ValueError(f"theta0 must be finite with shape ({p},), got {theta}")
        value = float(self.log_density(theta))
        if not math.isfinite(value):
            raise ValueError(f"log_density(theta0) must be finite, got {value}")
        return MHState(
            theta=theta,
            log_density=value,
            t=0,
            iterations=iterations,
            scale=self.scale,
            samples=self.L.new_empty(iterations, p),
            accepted=torch.zeros(iterations, dtype=torch.bool, device=self.L.device),
        )

    def advance(
        self,
        state: MHState,
        count: int,
        generator: torch.Generator,
        *,
        callback: Callable[[int, torch.Tensor], object] | None = None,
    ) -> MHState:
        """Take up to ``count`` more steps in place (resumable like :meth:`SGLD.advance`)."""
        generator = require_generator(generator)
        p = self.L.shape[0]
        stop = min(state.iterations, state.t + check_positive_int(count, "count"))
        centre = 0.5 * sum(self.acceptance_range)
        while state.t < stop:
            t = state.t
            z = rnd.randn(p, generator=generator, dtype=torch.float64, device=self.L.device)
            u = float(rnd.rand((), generator=generator, dtype=torch.float64, device="cpu"))
            proposal = state.theta + state.scale * (self.L @ z)
            value = float(self.log_density(proposal))
            accept = math.isfinite(value) and math.log(u) < value - state.log_density
            if accept:
                state.theta, state.log_density = proposal, value
            state.samples[t], state.accepted[t] = state.theta, accept
            state.t = t + 1
            if t < self.adapt:
                state.window.append(accept)
                if len(state.window) == self.adapt_every:
                    rate = sum(state.window) / len(state.window)
                    # Robbins–Monro on log s towards the window's centre, with steps
                    # shrinking as 1/√k: a one-sided rule (adjust only outside the window)
                    # stops wherever one noisy window lands inside it, and on concrete
                    # left the chain at 0.44 after 10 000 adaptive steps
                    k = (t + 1) // self.adapt_every
                    state.scale *= math.exp(4.0 * (rate - centre) / math.sqrt(k))
                    state.window = []
            if callback is not None:
                callback(t, state.theta)
        return state

    def _result(self, state: MHState) -> MHState:
        return state
