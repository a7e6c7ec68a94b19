"""Per-step log and result of a hyperparameter-training run."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import torch

from ...iterative import KernelSolveInfo
from ...kernels.kernel import Kernel

__all__ = ["StepRecord", "StepSolve", "TrainingResult"]


@dataclass(frozen=True)
class StepSolve:
    """What the solve of one training step reported.

    These are the fields of :class:`StepRecord` that come from the solve.

    The defaults describe a step without an iterative solve (the Cholesky solver, the
    exact estimator): exact, free, converged.

    Attributes
    ----------
    residual_norm_mean, residual_norm_probes
        Relative residual norms of the mean system and (averaged) of the probe systems.
    epochs, setup_epochs
        All epochs of the solve and the part outside the iterations.
    iterations
        Solver iterations.
    converged
        Whether both tolerances held.
    """

    residual_norm_mean: float = 0.0
    residual_norm_probes: float = 0.0
    epochs: float = 0.0
    setup_epochs: float = 0.0
    iterations: int = 0
    converged: bool = True

    @classmethod
    def of(cls, info: KernelSolveInfo) -> StepSolve:
        """The record of a kernel-system solve's info: its fields of the same names."""
        return cls(**{f.name: getattr(info, f.name) for f in fields(cls)})

    def unusable(self, max_residual: float | None) -> bool:
        """Whether the step's gradient must be skipped.

        True when the solve stopped unconverged with a residual (mean or probes) above
        ``max_residual`` (``None``: never skip).
        """
        worst = max(self.residual_norm_mean, self.residual_norm_probes)
        return max_residual is not None and not self.converged and worst > max_residual


@dataclass(frozen=True)
class StepRecord:
    """One Adam step.

    Attributes
    ----------
    step
        0-based step index.
    residual_norm_mean, residual_norm_probes
        Relative residual norms of the mean system and (averaged) of the probe
        systems after this step's solve (``0`` for the Cholesky solver; ``nan``
        probes for the exact estimator).
    epochs
        Solver epochs of this step, all work counted (``0`` for Cholesky).
    setup_epochs
        The part of ``epochs`` outside the iterations (warm-start residual,
        preconditioner, cached block factors, true-residual checks); the epoch budget
        caps ``epochs − setup_epochs``, as in Algorithms 1–3 of Lin et al. (2024).
    iterations
        Solver iterations of this step.
    converged
        Whether the solve met both tolerances (always ``True`` for Cholesky).
    skipped
        The Adam update was skipped: the solve stopped unconverged with a residual
        above ``TrainingConfig.max_step_residual``.
    seconds
        Wall time of the step (solve + gradient + Adam update).
    lengthscale
        Tuple of the ``d`` lengthscales *before* the update (empty for a kernel other
        than an RBF, Matérn or rational quadratic one).
    outputscale, noise
        Before the update (``outputscale`` is NaN for a kernel without one).
    parameters
        Every positive parameter of the kernel before the update, as ``(name, values)``
        pairs in ``kernel.named_parameters()`` order (``raw_`` dropped); empty for the
        default Matérn model.
    """

    step: int
    residual_norm_mean: float
    residual_norm_probes: float
    epochs: float
    setup_epochs: float
    iterations: int
    converged: bool
    skipped: bool
    seconds: float
    lengthscale: tuple[float, ...]
    outputscale: float
    noise: float
    parameters: tuple[tuple[str, tuple[float, ...]], ...] = ()


@dataclass
class TrainingResult:
    """What :func:`~pnsolve.gp.training.train_hyperparameters` returns.

    Attributes
    ----------
    kernel
        The fitted kernel (trained in place).
    noise
        Fitted noise variance ``σ²``.
    mean
        Constant prior mean (the training-target mean).
    log
        One :class:`StepRecord` per step.
    solutions
        The last step's solutions ``(n, 1 + s)`` (``None`` for the exact estimator),
        i.e. the warm start a continued run would use. They solve the systems at the
        hyperparameters of ``log[-1]`` (before the last Adam update), not at
        ``kernel``/``noise``.
    estimator
        The gradient estimator with its frozen draws; with ``solutions`` and the
        hyperparameters of ``log[-1]`` it gives pathwise posterior samples with no
        further solve (:meth:`PathwiseEstimator.posterior_samples`).
    """

    kernel: Kernel
    noise: float
    mean: float
    log: list[StepRecord] = field(default_factory=list)
    solutions: torch.Tensor | None = None
    estimator: object | None = None

    @property
    def total_epochs(self) -> float:
        """Solver epochs summed over all steps."""
        return float(sum(r.epochs for r in self.log))

    @property
    def total_seconds(self) -> float:
        """Wall time summed over all steps."""
        return float(sum(r.seconds for r in self.log))
