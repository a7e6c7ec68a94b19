"""The training loop: Adam on softplus hyperparameters, gradients from iterative solves."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from ...iterative import (
    AlternatingProjections,
    ConjugateGradients,
    KernelSystem,
    StochasticGradientDescent,
)
from ...kernels.base import inv_softplus, softplus
from ...kernels.matern import Matern
from .._checks import check_inputs, check_targets
from ..mll_estimators import (
    ExactEstimator,
    GradientEstimator,
    PathwiseEstimator,
    StandardEstimator,
)
from .checkpoint import _identity_mismatch, _tensor_digest, load_checkpoint, save_checkpoint
from .config import TrainingConfig
from .heuristic import initial_hyperparameters
from .record import StepRecord, TrainingResult

__all__ = ["make_estimator", "make_solver", "train_hyperparameters"]


def make_solver(config: TrainingConfig, n: int) -> Any:
    """The iterative solver a configuration names (``None`` for ``"cholesky"``)."""
    common = {"tol": config.tol, "tol_probes": config.tol_probes}
    if config.solver == "cg":
        return ConjugateGradients(**common, preconditioner_rank=min(config.preconditioner_rank, n))
    if config.solver == "ap":
        return AlternatingProjections(**common, block_size=min(config.block_size, n))
    if config.solver == "sgd":
        extra = {} if config.sgd_lr is None else {"learning_rate": config.sgd_lr}
        return StochasticGradientDescent(
            **common, batch_size=min(config.batch_size, n), momentum=config.momentum, **extra
        )
    return None


def make_estimator(config: TrainingConfig, generator: torch.Generator) -> GradientEstimator:
    """The gradient estimator a configuration names, drawing from ``generator``."""
    if config.estimator == "exact":
        return ExactEstimator()
    if config.estimator == "standard":
        return StandardEstimator(config.num_probes, generator=generator)
    return PathwiseEstimator(config.num_probes, config.num_features, generator=generator)


class _Model(nn.Module):
    """Matérn-3/2 ARD kernel and softplus noise: the trained parameters."""

    def __init__(
        self, lengthscale: torch.Tensor, outputscale: float, noise: float, min_noise: float
    ) -> None:
        super().__init__()
        # kernel hyperparameters are stored in float64 (pnsolve's rule, cast to the
        # data's dtype at evaluation); the noise lives in the data's dtype
        self.kernel = Matern(
            nu=1.5,
            lengthscale=lengthscale,
            outputscale=torch.tensor(outputscale, dtype=lengthscale.dtype),
        )
        raw = inv_softplus(torch.tensor(max(noise - min_noise, 1e-12), dtype=lengthscale.dtype))
        self.raw_noise = nn.Parameter(raw.to(lengthscale.device))
        self.min_noise = min_noise

    def noise(self) -> torch.Tensor:
        return softplus(self.raw_noise) + self.min_noise


def _identity(
    X: torch.Tensor,
    y: torch.Tensor,
    config: TrainingConfig,
    generator: torch.Generator,
    run_info: Mapping[str, object] | None,
) -> dict[str, object]:
    """Everything that determines a trajectory: a resumed run must match it exactly."""
    identity: dict[str, object] = dict(config.as_dict())
    identity["data"] = _tensor_digest(X, y)
    identity["generator"] = _tensor_digest(generator.get_state())
    for key, value in (run_info or {}).items():
        if not isinstance(key, str) or key in identity:
            raise ValueError(f"run_info key {key!r} must be a new string key")
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float | str)
        ):
            raise TypeError(
                f"run_info[{key!r}] must be an int, float, str or None, got {type(value).__name__}"
            )
        identity[key] = value
    return identity


def _cholesky_solve(kernel, X, noise, B):
    K = kernel(X)
    K.diagonal().add_(noise)
    return torch.cholesky_solve(B, torch.linalg.cholesky(K))


def train_hyperparameters(
    X: torch.Tensor,
    y: torch.Tensor,
    config: TrainingConfig | None = None,
    *,
    generator: torch.Generator,
    checkpoint: str | os.PathLike | None = None,
    progress: bool = False,
    callback: Callable[[StepRecord], None] | None = None,
    on_resume: Callable[[int], None] | None = None,
    run_info: Mapping[str, object] | None = None,
) -> TrainingResult:
    """Maximise the marginal likelihood of a Matérn-3/2 ARD GP with iterative solves.

    Each step builds ``K̂ = K + σ²I`` at the current hyperparameters, forms the
    estimator's right-hand sides ``[y, probes]`` (``(n, 1 + s)``), solves them with the
    configured solver (warm-started at the previous solutions when
    ``config.warm_start``; within ``config.epochs_budget`` epochs), lets the estimator
    accumulate its gradient estimate of ``−log p(y | θ)`` and takes one Adam step on
    the softplus-inverse (raw) hyperparameters.

    Parameters
    ----------
    X, y
        Training inputs ``(n, d)`` and targets ``(n,)``; the targets are centred with
        their mean (the constant prior mean).
    config
        The run's :class:`TrainingConfig` (default: CG + pathwise + warm starts).
    generator
        All randomness (probe draws, SGD minibatches, the init heuristic's centroids).
        Its state on entry is part of the run's identity: resume with a generator
        seeded like the interrupted run's.
    checkpoint
        File written (with a SHA-256 checksum, atomically) after every step. If it
        exists, the run *resumes* from it: the parameters, Adam state, probe draws,
        warm-start solutions, generator state and log are restored, so an interrupted
        run continues on the identical trajectory. A checkpoint of another run is
        refused, naming the differing keys: every field of ``config``, the data
        (``X``, ``y`` bytes), the generator's state on entry and ``run_info``. A
        corrupt or truncated file is refused, naming the file.
    progress
        Show a tqdm progress bar with the residual norms, the solver epochs and the
        set-up epochs of the last step.
    callback
        Called with each step's :class:`StepRecord` after the checkpoint is written.
    on_resume
        Called once, before the first step, with the number of completed steps a
        checkpoint restored (only when one was loaded).
    run_info
        Extra identity entries (str keys; int, float, str or ``None`` values) stored in
        the checkpoint and compared on resume, e.g. the command line's seed and split,
        so that a mismatch names them.

    Returns
    -------
    TrainingResult
        Fitted kernel and noise, the per-step log and the last solutions.

    Raises
    ------
    ValueError
        Bad shapes or values (naming the argument), or a checkpoint that does not
        belong to this configuration/data.
    """
    config = TrainingConfig() if config is None else config
    if not isinstance(config, TrainingConfig):
        raise TypeError(f"config must be a TrainingConfig, got {type(config).__name__}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    X = check_inputs(X, "X")
    y = check_targets(y, X)
    n, d = X.shape
    mean = float(y.mean())
    yc = y - mean
    identity = _identity(X, y, config, generator, run_info)
    path = None if checkpoint is None else Path(checkpoint)
    saved = load_checkpoint(path) if path is not None and path.exists() else None
    if saved is not None:
        differs = _identity_mismatch(saved["identity"], identity)
        if differs is not None:
            raise ValueError(
                f"checkpoint {str(path)!r} belongs to another run; it differs in: {differs}. "
                "Delete it or choose another checkpoint file"
            )
        if on_resume is not None:
            on_resume(len(saved["log"]))

    if saved is None and config.init == "heuristic":
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
    model = _Model(ls.to(X.dtype), os_, noise0, config.min_noise).to(X.device)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    estimator = make_estimator(config, generator)
    solver = make_solver(config, n)
    log: list[StepRecord] = []
    solutions: torch.Tensor | None = None
    if saved is not None:
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        if saved["estimator"] is not None:
            # checkpoints load on the CPU: the frozen draws go back to the data's device
            # (the generator state stays a CPU byte tensor, as torch requires)
            estimator.load_state_dict(
                {
                    k: v if k == "generator_state" else v.to(X.device)
                    for k, v in saved["estimator"].items()
                }
            )
        generator.set_state(saved["generator"])
        log = list(saved["log"])
        solutions = saved["solutions"]
        if solutions is not None:
            solutions = solutions.to(dtype=X.dtype, device=X.device)

    bar = tqdm(
        range(len(log), config.steps),
        total=config.steps,
        initial=len(log),
        disable=not progress,
        desc=f"fit {config.solver}/{config.estimator}{' warm' if config.warm_start else ''}",
    )
    try:
        for step in bar:
            t0 = time.perf_counter()
            noise = model.noise()
            before = (
                tuple(float(v) for v in model.kernel.lengthscale.detach().reshape(-1)),
                float(model.kernel.outputscale.detach()),
                float(noise.detach()),
            )
            opt.zero_grad()
            skip = False
            if not config.warm_start and config.estimator != "exact":
                estimator.resample(generator)
            if config.estimator == "exact":
                estimator.backward(model.kernel, X, noise, yc, None)
                res = (0.0, 0.0, 0.0, 0, True, 0.0)
            else:
                with torch.no_grad():
                    B = estimator.targets(model.kernel, X, noise.detach(), yc)
                    if solver is None:
                        solutions = _cholesky_solve(model.kernel, X, float(noise), B)
                        res = (0.0, 0.0, 0.0, 0, True, 0.0)
                    else:
                        x0 = solutions if config.warm_start else None
                        system = KernelSystem(model.kernel, X, noise.detach())
                        out = solver.solve(
                            system, B, x0, max_epochs=config.epochs_budget, generator=generator
                        )
                        solutions = out.solution
                        res = (
                            out.residual_norm_mean,
                            out.residual_norm_probes,
                            out.epochs,
                            out.iterations,
                            out.converged,
                            out.setup_epochs,
                        )
                skip = (
                    config.max_step_residual is not None
                    and not res[4]
                    and max(res[0], res[1]) > config.max_step_residual
                )
                if not skip:
                    estimator.backward(model.kernel, X, noise, yc, solutions)
            if not skip:
                opt.step()
            record = StepRecord(
                step=step,
                residual_norm_mean=float(res[0]),
                residual_norm_probes=float(res[1]) if config.estimator != "exact" else float("nan"),
                epochs=float(res[2]),
                setup_epochs=float(res[5]),
                iterations=int(res[3]),
                converged=bool(res[4]),
                skipped=skip,
                seconds=time.perf_counter() - t0,
                lengthscale=before[0],
                outputscale=before[1],
                noise=before[2],
            )
            log.append(record)
            bar.set_postfix(  # a dict keeps this order (keywords would be sorted)
                {
                    "res_mean": f"{record.residual_norm_mean:.1e}",
                    "res_probes": f"{record.residual_norm_probes:.1e}",
                    "solver_epochs": f"{record.epochs - record.setup_epochs:.1f}",
                    "setup_epochs": f"{record.setup_epochs:.1f}",
                }
            )
            if path is not None:
                save_checkpoint(
                    path,
                    {
                        "identity": identity,
                        "model": model.state_dict(),
                        "optimizer": opt.state_dict(),
                        "estimator": (
                            None if config.estimator == "exact" else estimator.state_dict()
                        ),
                        "generator": generator.get_state(),
                        "log": log,
                        "solutions": solutions,
                    },
                )
            if callback is not None:
                callback(record)
    finally:
        bar.close()  # ends the bar's line, also on Ctrl-C
    model.requires_grad_(False)
    return TrainingResult(
        kernel=model.kernel,
        noise=float(model.noise().detach()),
        mean=mean,
        log=log,
        solutions=solutions,
        estimator=estimator,
    )
