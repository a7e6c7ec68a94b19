"""Settings shared by every chain of :func:`~pnsolve.gp.bayes.sample_hyperparameters`."""

from __future__ import annotations

from dataclasses import dataclass

from ..._core.validation import check_positive_int
from ...kernels.kernel_matrix import BACKENDS as KERNEL_BACKENDS
from .gradient import GRADIENTS

__all__ = ["SAMPLERS", "ChainConfig"]

#: The samplers: SGLD with stochastic gradients, or the exact-likelihood MH reference.
SAMPLERS = ("sgld", "mh")


@dataclass(frozen=True)
class ChainConfig:
    """Settings shared by every chain (defaults: Filippone & Engler 2015, §5.1).

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
        The paper's eq. 7 freezing (0.002, batches of 100 gradients).
    num_probes, redraw_every, alpha, beta
        The gradient estimator's (4 probes, redrawn every 20; ``β = 1``). ``alpha``
        defaults to ``0.1 √n``, the paper's smaller threshold (its Fig. 3): with the
        paper's own ``√n`` the ULISSE estimates on concrete were heavy-tailed enough
        that four chains did not agree (PSRF 5–25). These defaults leave the sds
        20–70 % wider than MH's; ``num_probes=16, alpha=0.01 * n ** 0.5`` gives MH's
        spread for ~4 × the products per step (docs/sgld.md §5.1).
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
    freeze_threshold: float = 0.002
    variance_batch: int = 100
    num_probes: int = 4
    redraw_every: int = 20
    alpha: float | None = None
    beta: float = 1.0
    burn_in: int | None = None
    subset: int = 500
    checkpoint_every: int = 1000
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if self.gradient not in GRADIENTS:
            raise ValueError(f"gradient must be one of {GRADIENTS}, got {self.gradient!r}")
        check_positive_int(self.iterations, "iterations")
        if self.backend not in KERNEL_BACKENDS:
            raise ValueError(f"backend must be one of {KERNEL_BACKENDS}, got {self.backend!r}")
        if self.backend == "distributed" and (self.sampler == "mh" or self.gradient == "exact"):
            raise ValueError(
                'backend="distributed" splits kernel products over ranks; MH and the exact '
                "gradient factor K̂ by Cholesky on every rank instead: use SGLD with the "
                "ulisse or cg gradient"
            )
        if self.burn_in is not None and not 0 <= self.burn_in < self.iterations:
            raise ValueError(f"burn_in must be in [0, iterations), got {self.burn_in}")

    @property
    def mh_burn_in(self) -> int:
        """MH's burn-in (and adaptive phase)."""
        return self.iterations // 5 if self.burn_in is None else self.burn_in
