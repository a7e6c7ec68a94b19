"""The training loop: Adam on softplus hyperparameters, gradients from iterative solves."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..._core.precision import full_float32
from ..._core.statefile import tensor_digest
from ...kernels.backends.collectives import collective, is_lead, require_process_group
from ...kernels.kernel import Kernel
from .._checks import check_inputs, check_matrix_free_kernel, check_targets
from .checkpoint import (
    TrainingCheckpoint,
    _identity_mismatch,
    load_checkpoint,
    save_checkpoint,
)
from .config import TrainingConfig
from .record import StepRecord, TrainingResult
from .run import TrainingRun, make_estimator, make_solver

__all__ = ["make_estimator", "make_solver", "train_hyperparameters"]


def _identity(
    X: torch.Tensor,
    y: torch.Tensor,
    config: TrainingConfig,
    generator: torch.Generator,
    run_info: Mapping[str, object] | None,
) -> dict[str, object]:
    """Everything that determines a trajectory: a resumed run must match it exactly."""
    identity: dict[str, object] = dict(config.as_dict())
    identity["data"] = tensor_digest(X, y)
    identity["generator"] = tensor_digest(generator.get_state())
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


@full_float32
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
    kernel: Kernel | None = None,
) -> TrainingResult:
    """Maximise the marginal likelihood of a GP (Matérn-3/2 ARD by default) with iterative solves.

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
        File written (with a SHA-256 checksum, atomically) after every step (with
        ``config.backend="distributed"`` by rank 0 only, which also reads it and sends
        it to the other ranks when resuming). If it
        exists, the run *resumes* from it: the parameters, Adam state, probe draws,
        warm-start solutions, generator state and log are restored, so an interrupted
        run continues on the identical trajectory. A checkpoint of another run is
        refused, naming the differing keys: every field of ``config``, the data
        (``X``, ``y`` bytes), the generator's state on entry and ``run_info``. A
        corrupt or truncated file is refused, naming the file.
    progress
        Show a tqdm progress bar with the residual norms, the solver epochs and the
        set-up epochs of the last step (distributed: on rank 0).
    callback
        Called with each step's :class:`StepRecord` after the checkpoint is written.
    on_resume
        Called once, before the first step, with the number of completed steps a
        checkpoint restored (only when one was loaded).
    run_info
        Extra identity entries (str keys; int, float, str or ``None`` values) stored in
        the checkpoint and compared on resume, e.g. the command line's seed and split,
        so that a mismatch names them.
    kernel
        The kernel to train instead of the default Matérn-3/2 ARD one: any family of
        :mod:`pnsolve.kernels` or an expression of them, trained *in place* from its own
        values (``config.init`` then sets the starting noise only: ``init_value``). Its
        structure (classes and parameter shapes) is part of a checkpoint's identity.
        The ``"pathwise"`` estimator needs random Fourier features
        (``kernel.has_spectral_features``: not for periodic, linear, polynomial or
        white-noise parts); use ``"standard"`` or ``"exact"`` otherwise.

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
    if kernel is not None:
        kernel = check_matrix_free_kernel(kernel, "train_hyperparameters")
        if config.estimator == "pathwise" and not kernel.has_spectral_features:
            raise ValueError(
                "estimator='pathwise' draws random Fourier features, which RBF, Matérn, "
                "rational quadratic, spectral mixture, cosine and constant kernels have (and "
                f"sums and products of them), not {kernel!r}; use "
                "TrainingConfig(estimator='standard') or 'exact'"
            )
        kernel.check_inputs(X)
        run_info = {**(run_info or {}), "kernel": kernel_structure(kernel)}
    identity = _identity(X, y, config, generator, run_info)
    path = None if checkpoint is None else Path(checkpoint)
    saved = _load_shared(path, identity, config.backend)
    if saved is not None and on_resume is not None:
        on_resume(len(saved.log))
    run = TrainingRun.begin(X, y, config, generator, saved, kernel)
    lead = is_lead(config.backend)  # with backend="distributed" only rank 0 shows and writes
    bar = tqdm(
        range(len(run.log), config.steps),
        total=config.steps,
        initial=len(run.log),
        disable=not (progress and lead),
        desc=f"fit {config.solver}/{config.estimator}{' warm' if config.warm_start else ''}",
    )
    try:
        for step in bar:
            record = run.step(step)
            bar.set_postfix(  # a dict keeps this order (keywords would be sorted)
                {
                    "res_mean": f"{record.residual_norm_mean:.1e}",
                    "res_probes": f"{record.residual_norm_probes:.1e}",
                    "solver_epochs": f"{record.epochs - record.setup_epochs:.1f}",
                    "setup_epochs": f"{record.setup_epochs:.1f}",
                }
            )
            if path is not None and lead:
                save_checkpoint(path, run.checkpoint(identity))
            if callback is not None:
                callback(record)
    finally:
        bar.close()  # ends the bar's line, also on Ctrl-C
    return run.result()


def kernel_structure(kernel: Kernel) -> str:
    """The classes and parameter shapes of a kernel (not its values): a run's identity."""
    modules = ",".join(f"{name or '.'}:{type(m).__name__}" for name, m in kernel.named_modules())
    shapes = ",".join(f"{name}{list(p.shape)}" for name, p in kernel.named_parameters())
    return f"{modules};{shapes}"


def _load_shared(
    path: Path | None, identity: dict[str, object], backend: str
) -> TrainingCheckpoint | None:
    """:func:`_load_matching`; with ``backend="distributed"`` rank 0 reads and sends it.

    So every rank resumes from the same state without a shared file system, and a
    checkpoint rank 0 refuses is refused on every rank (none is left waiting). First
    the ranks compare their runs' identities (data, targets, configuration, generator
    state): ranks that would take different steps are refused by name.
    """
    if backend != "distributed":
        return _load_matching(path, identity)
    import torch.distributed as dist

    rank, world = require_process_group()
    # the ranks must run the same training (data, targets, configuration, generator)
    identities: list[Any] = [None] * world
    collective(lambda: dist.all_gather_object(identities, identity), "comparing the runs")
    for r, other in enumerate(identities):
        differs = _identity_mismatch(identities[0], other)
        if differs is not None:
            raise ValueError(
                f'backend="distributed": rank {r} runs another training than rank 0; it '
                f"differs in: {differs}"
            )
    box: list[Any] = [None, None]  # (checkpoint or None, error message or None)
    if rank == 0:
        try:
            box[0] = _load_matching(path, identity)
        except Exception as exc:  # whatever it is, every rank must hear of it
            box[1] = f"{type(exc).__name__}: {exc}"
    collective(lambda: dist.broadcast_object_list(box, src=0), "sharing the checkpoint")
    if box[1] is not None:
        raise ValueError(f"rank 0 could not resume from {path}: {box[1]}")
    return box[0]


def _load_matching(path: Path | None, identity: dict[str, object]) -> TrainingCheckpoint | None:
    """The checkpoint at ``path`` if it exists (``None`` otherwise).

    Refused, naming the differing keys, if it belongs to another run.
    """
    if path is None or not path.exists():
        return None
    saved = load_checkpoint(path)
    differs = _identity_mismatch(saved.identity, identity)
    if differs is not None:
        raise ValueError(
            f"checkpoint {str(path)!r} belongs to another run; it differs in: {differs}. "
            "Delete it or choose another checkpoint file"
        )
    return saved
