"""Settings shared by every chain of :func:`~pnsolve.gp.bayes.sample_hyperparameters`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..._core.validation import (
    check_int,
    check_nonnegative_number,
    check_positive_int,
    check_positive_number,
)
from ...kernels.kernel_matrix import BACKENDS as KERNEL_BACKENDS
from .gradient import GRADIENTS

__all__ = ["SAMPLERS", "ChainConfig"]

#: The samplers: SGLD with stochastic gradients, or the exact-likelihood MH reference.
SAMPLERS = ("sgld", "mh")


@dataclass(frozen=True)
class ChainConfig:
    """Settings shared by every chain (Filippone & Engler 2015, §5.1; defaults checked on MH).

    The defaults differ from the paper's where its settings disagreed with exact
    Metropolis–Hastings within 10 000 iterations (see the attributes).

    Attributes
    ----------
    sampler
        ``"sgld"`` or ``"mh"``.
    gradient
        SGLD's gradient: ``"ulisse"``, ``"cg"`` or ``"exact"``.
    iterations
        Steps per chain.
    step_start, step_end
        SGLD's schedule ``ε_t = a (b + t)⁻¹`` (1e-1 → 1e-4).
    freeze_threshold, variance_batch
        The paper's eq. 7 freezing: the step size freezes once the gradient noise is
        below ``freeze_threshold`` of the injected noise, judged on batches of
        ``variance_batch`` gradients (0.1 and 20; the paper's 0.002 and 100 froze the
        schedule ``ε_t ∝ (b + t)⁻¹`` at steps of ~0.005, too small for four chains of
        10 000 iterations to mix: chain means 0.5–1.3 posterior sds apart). A share
        ``s`` of gradient noise widens the draws by about ``√(1 + s)``.
    num_probes, redraw_every, alpha, beta
        The gradient estimator's: 16 probes (the paper's 4 left the chains' sds
        20–70 % wider than Metropolis–Hastings'), redrawn at every call (probes kept
        for the paper's 20 calls make the gradient noise of 20 consecutive steps the
        same: it adds up along the chain, widening the draws about twofold, and a
        batch of such gradients hides it from the freezing rule); ``alpha``
        defaults to ``0.01 √n`` (a relative residual of 1 % for Rademacher probes; the
        paper's ``√n`` and its smaller ``0.1 √n`` gave heavy-tailed estimates whose
        chains disagreed, PSRF 5–25 on concrete); ``β = 1``.
    preconditioner_rank
        Pivots of the gradient's pivoted-Cholesky preconditioner (100; ``0``: plain CG,
        as in the paper). Preconditioned CG reaches the threshold in a fraction of the
        products and its increments past it shrink faster, so the roulette's estimates
        lose the heavy tail that biased plain-CG chains (see "SGLD with ULISSE
        gradients" in the docs).
    burn_in
        MH: discarded iterations, also the adaptive phase (default ``iterations // 5``:
        the paper's 10 000 of 50 000).
    subset
        Points of the MAP/Laplace fit that sets ``M`` and the starting points (500).
    checkpoint_every
        Iterations between checkpoints (when a checkpoint path is given).
    backend
        ``KernelMatrix`` backend of SGLD's products (``"auto"``: dense up to 32 MiB, else
        matrix-free; ``"chunked"`` or ``"keops"`` force matrix-free products;
        ``"distributed"``: inside an initialised torch.distributed group every rank runs
        the chains in turn with each product split over the ranks, and rank 0 writes the
        checkpoints; see the "Scaling out" docs page).
    """

    sampler: str = "sgld"
    gradient: str = "ulisse"
    iterations: int = 40_000
    step_start: float = 1e-1
    step_end: float = 1e-4
    freeze_threshold: float = 0.1
    variance_batch: int = 20
    num_probes: int = 16
    redraw_every: int = 1
    alpha: float | None = None
    beta: float = 1.0
    burn_in: int | None = None
    subset: int = 500
    checkpoint_every: int = 1000
    backend: str = "auto"
    preconditioner_rank: int = 100

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if self.gradient not in GRADIENTS:
            raise ValueError(f"gradient must be one of {GRADIENTS}, got {self.gradient!r}")
        check_positive_int(self.iterations, "iterations")
        for name in ("num_probes", "redraw_every", "subset", "checkpoint_every", "variance_batch"):
            check_positive_int(getattr(self, name), name)
        check_int(self.preconditioner_rank, "preconditioner_rank", minimum=0)
        start = check_positive_number(self.step_start, "step_start")
        end = check_positive_number(self.step_end, "step_end")
        if not end < start:
            raise ValueError(
                f"step_end must be smaller than step_start (the step sizes decrease), got "
                f"step_start={self.step_start}, step_end={self.step_end}"
            )
        if self.sampler == "sgld" and self.iterations < 2:
            raise ValueError(f"iterations must be at least 2 for SGLD, got {self.iterations}")
        check_nonnegative_number(self.freeze_threshold, "freeze_threshold")
        if self.alpha is not None and not math.isfinite(
            check_nonnegative_number(self.alpha, "alpha")
        ):
            raise ValueError(f"alpha must be a finite number ≥ 0, got {self.alpha!r}")
        check_positive_number(self.beta, "beta")
        if self.backend not in KERNEL_BACKENDS:
            raise ValueError(f"backend must be one of {KERNEL_BACKENDS}, got {self.backend!r}")
        if self.backend == "distributed" and (self.sampler == "mh" or self.gradient == "exact"):
            raise ValueError(
                'backend="distributed" splits kernel products over ranks; MH and the exact '
                "gradient factor K̂ by Cholesky on every rank instead: use SGLD with the "
                "ulisse or cg gradient"
            )
        if self.burn_in is not None and (
            isinstance(self.burn_in, bool)
            or not isinstance(self.burn_in, int)
            or not 0 <= self.burn_in < self.iterations
        ):
            raise ValueError(f"burn_in must be in [0, iterations), got {self.burn_in}")

    def alpha_for(self, n: int) -> float:
        """The threshold for ``n`` data points: ``alpha``, or ``0.01 √n`` by default."""
        return 0.01 * math.sqrt(n) if self.alpha is None else float(self.alpha)

    @property
    def mh_burn_in(self) -> int:
        """MH's burn-in (and adaptive phase)."""
        return self.iterations // 5 if self.burn_in is None else self.burn_in
