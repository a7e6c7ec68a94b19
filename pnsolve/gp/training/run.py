"""The state of a training run between Adam steps, and one step of it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from ...iterative import (
    AlternatingProjections,
    ConjugateGradients,
    KernelSystem,
    StochasticGradientDescent,
)
from ...iterative.sgd import DEFAULT_LEARNING_RATE
from ...kernels.base import inv_softplus, softplus
from ...kernels.kernel import Kernel
from ...kernels.matern import Matern
from ..mll_estimators import (
    ExactEstimator,
    GradientEstimator,
    PathwiseEstimator,
    StandardEstimator,
)
from .checkpoint import TrainingCheckpoint
from .config import TrainingConfig
from .heuristic import initial_hyperparameters
from .record import StepRecord, StepSolve, TrainingResult
from .summary import hyperparameter_summary

__all__ = ["TrainingRun", "make_estimator", "make_solver"]


#: The iterative kernel-system solvers a configuration can name.
KernelSolver = ConjugateGradients | AlternatingProjections | StochasticGradientDescent


def make_solver(config: TrainingConfig, n: int) -> KernelSolver | None:
    """The iterative solver a configuration names (``None`` for ``"cholesky"``)."""
    tol, tol_probes = config.tol, config.tol_probes
    if config.solver == "cg":
        rank = min(config.preconditioner_rank, n)
        return ConjugateGradients(tol=tol, tol_probes=tol_probes, preconditioner_rank=rank)
    if config.solver == "ap":
        block = min(config.block_size, n)
        return AlternatingProjections(tol=tol, tol_probes=tol_probes, block_size=block)
    if config.solver == "sgd":
        return StochasticGradientDescent(
            tol=tol,
            tol_probes=tol_probes,
            batch_size=min(config.batch_size, n),
            learning_rate=DEFAULT_LEARNING_RATE if config.sgd_lr is None else config.sgd_lr,
            momentum=config.momentum,
        )
    return None


def _stochastic(estimator: GradientEstimator) -> StandardEstimator | PathwiseEstimator:
    """The estimator as one with frozen draws (what every estimator but "exact" is)."""
    # make_estimator builds a Standard or Pathwise estimator unless config.estimator is
    # "exact"; callers only ask for the draws of the others
    return cast(StandardEstimator | PathwiseEstimator, estimator)


def make_estimator(config: TrainingConfig, generator: torch.Generator) -> GradientEstimator:
    """The gradient estimator a configuration names, drawing from ``generator``."""
    distributed = config.backend == "distributed"
    if config.estimator == "exact":
        return ExactEstimator()
    if config.estimator == "standard":
        return StandardEstimator(config.num_probes, generator=generator, distributed=distributed)
    return PathwiseEstimator(
        config.num_probes, config.num_features, generator=generator, distributed=distributed
    )


class _Model(nn.Module):
    """The kernel (Matérn-3/2 ARD unless one is given) and softplus noise: the parameters."""

    def __init__(
        self,
        lengthscale: torch.Tensor,
        outputscale: float,
        noise: float,
        min_noise: float,
        kernel: Kernel | None = None,
    ) -> None:
        super().__init__()
        # kernel hyperparameters are stored in float64 (pnsolve's rule, cast to the
        # data's dtype at evaluation); the noise lives in the data's dtype
        self.kernel: Kernel = (
            kernel
            if kernel is not None
            else Matern(
                nu=1.5,
                lengthscale=lengthscale,
                outputscale=lengthscale.new_tensor(outputscale),
            )
        )
        raw = inv_softplus(lengthscale.new_tensor(max(noise - min_noise, 1e-12)))
        self.raw_noise = nn.Parameter(raw)
        self.min_noise = min_noise

    def noise(self) -> torch.Tensor:
        return softplus(self.raw_noise) + self.min_noise


@dataclass
class TrainingRun:
    """The state of one training run between steps (what a checkpoint saves).

    :meth:`begin` starts or restores a run, :meth:`step` takes one Adam step,
    :meth:`checkpoint` and :meth:`result` report it.
    """

    X: torch.Tensor  # (n, d)
    yc: torch.Tensor  # (n,) centred targets
    mean: float
    config: TrainingConfig
    generator: torch.Generator
    model: _Model
    optimizer: torch.optim.Adam
    estimator: GradientEstimator
    solver: KernelSolver | None
    log: list[StepRecord]
    solutions: torch.Tensor | None = None  # (n, 1 + s): the last step's, the next warm start
    custom_kernel: bool = False  # a kernel given by the caller (not the default Matérn)

    @classmethod
    def begin(
        cls,
        X: torch.Tensor,
        y: torch.Tensor,
        config: TrainingConfig,
        generator: torch.Generator,
        saved: TrainingCheckpoint | None,
        kernel: Kernel | None = None,
    ) -> TrainingRun:
        """A fresh run (initial hyperparameters), or the one ``saved`` restored.

        ``kernel`` (trained in place) replaces the default Matérn-3/2 ARD kernel.
        """
        mean = float(y.mean())
        yc = y - mean
        model = _initial_model(X, yc, config, generator, fresh=saved is None, kernel=kernel)
        opt = torch.optim.Adam(model.parameters(), lr=config.lr)
        estimator = make_estimator(config, generator)
        run = cls(X, yc, mean, config, generator, model, opt, estimator,
                  make_solver(config, X.shape[0]), log=[],
                  custom_kernel=kernel is not None)  # fmt: skip
        if saved is not None:
            run.restore(saved)
        return run

    def restore(self, saved: TrainingCheckpoint) -> None:
        """Parameters, Adam state, frozen draws, generator state, log and warm start."""
        X = self.X
        self.model.load_state_dict(saved.model)
        self.optimizer.load_state_dict(saved.optimizer)
        if saved.estimator is not None:
            # checkpoints load on the CPU: the frozen draws go back to the data's device
            # (the generator state stays a CPU byte tensor, as torch requires)
            _stochastic(self.estimator).load_state_dict(
                {
                    k: v if k == "generator_state" else v.to(X.device)
                    for k, v in saved.estimator.items()
                }
            )
        self.generator.set_state(saved.generator)
        self.log = list(saved.log)
        if saved.solutions is not None:
            self.solutions = saved.solutions.to(dtype=X.dtype, device=X.device)

    def step(self, step: int) -> StepRecord:
        """One Adam step: solve, gradient, update (skipped for an unusable solve); logged."""
        t0 = time.perf_counter()
        config, model = self.config, self.model
        noise = model.noise()
        before = (*hyperparameter_summary(model.kernel, self.custom_kernel), float(noise.detach()))
        self.optimizer.zero_grad()
        if not config.warm_start and config.estimator != "exact":
            _stochastic(self.estimator).resample(self.generator)
        if config.estimator == "exact":
            self.estimator.backward(model.kernel, self.X, noise, self.yc, None)
            solve, skip = StepSolve(), False
        else:
            solve = self._solve(noise.detach())
            skip = solve.unusable(config.max_step_residual)
            if not skip:
                self.estimator.backward(model.kernel, self.X, noise, self.yc, self.solutions)
        if not skip:
            self.optimizer.step()
        record = StepRecord(
            step=step,
            residual_norm_mean=float(solve.residual_norm_mean),
            residual_norm_probes=(
                float(solve.residual_norm_probes) if config.estimator != "exact" else float("nan")
            ),
            epochs=float(solve.epochs),
            setup_epochs=float(solve.setup_epochs),
            iterations=int(solve.iterations),
            converged=bool(solve.converged),
            skipped=skip,
            seconds=time.perf_counter() - t0,
            lengthscale=before[0],
            outputscale=before[1],
            parameters=before[2],
            noise=before[3],
        )
        self.log.append(record)
        return record

    @torch.no_grad()
    def _solve(self, noise: torch.Tensor) -> StepSolve:
        """Solve ``K̂ V = [y, probes]`` at the current hyperparameters into ``solutions``."""
        config, kernel = self.config, self.model.kernel
        B = self.estimator.targets(kernel, self.X, noise, self.yc)
        if self.solver is None:
            self.solutions = _cholesky_solve(kernel, self.X, float(noise), B)
            return StepSolve()
        x0 = self.solutions if config.warm_start else None
        system = KernelSystem(kernel, self.X, noise, backend=self.config.backend)
        self.solutions, info = self.solver.solve(
            system, B, x0, max_epochs=config.epochs_budget, generator=self.generator
        )
        return StepSolve.of(info)

    def checkpoint(self, identity: dict[str, object]) -> TrainingCheckpoint:
        """What the checkpoint file holds after the last step."""
        exact = self.config.estimator == "exact"
        return TrainingCheckpoint(
            identity=identity,
            model=self.model.state_dict(),
            optimizer=self.optimizer.state_dict(),
            estimator=None if exact else _stochastic(self.estimator).state_dict(),
            generator=self.generator.get_state(),
            log=self.log,
            solutions=self.solutions,
        )

    def result(self) -> TrainingResult:
        """The fitted hyperparameters, the log and the last solutions."""
        self.model.requires_grad_(False)
        return TrainingResult(
            kernel=self.model.kernel,
            noise=float(self.model.noise().detach()),
            mean=self.mean,
            log=self.log,
            solutions=self.solutions,
            estimator=self.estimator,
        )


def _initial_model(
    X: torch.Tensor,
    yc: torch.Tensor,
    config: TrainingConfig,
    generator: torch.Generator,
    *,
    fresh: bool,
    kernel: Kernel | None = None,
) -> _Model:
    """The module at the initial hyperparameters.

    The heuristic draws from ``generator`` only for a fresh run; a resumed one loads its
    parameters over these. A given ``kernel`` starts at its own values and the noise at
    ``config.init_value`` (the heuristic fits Matérn kernels: it does not apply).
    """
    d = X.shape[1]
    if kernel is not None:
        one = torch.ones(d, dtype=X.dtype, device=X.device)
        return _Model(one, 1.0, config.init_value, config.min_noise, kernel).to(X.device)
    if fresh and config.init == "heuristic":
        ls, os_, noise0 = initial_hyperparameters(
            X,
            yc,
            generator=generator,
            subset=config.init_subset,
            centroids=config.init_centroids,
            steps=config.init_steps,
            lr=config.lr,
            init_value=config.init_value,
        )
    else:
        ls = torch.full((d,), config.init_value, dtype=X.dtype, device=X.device)
        os_, noise0 = config.init_value, config.init_value
    return _Model(ls.to(X.dtype), os_, noise0, config.min_noise).to(X.device)


def _cholesky_solve(kernel: Kernel, X: torch.Tensor, noise: float, B: torch.Tensor) -> torch.Tensor:
    """``K̂⁻¹ B`` by a dense Cholesky factorisation (the ``"cholesky"`` solver)."""
    K = kernel(X)
    K.diagonal().add_(noise)
    return torch.cholesky_solve(B, torch.linalg.cholesky(K))
