"""Checkpoints of QSGP's training run.

What :func:`~pnsolve.gp.qsgp.training.fit` saves every few steps and restores on resume
(refused when the file belongs to another run).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..._core.statefile import load_state, save_state
from .estimator import ControlVariates
from .optim import SparseAdagrad
from .run import QSGPRun, identity_mismatch
from .warm_start import WarmStart

if TYPE_CHECKING:
    from .model import QSGP

__all__ = ["load_checkpoint", "save_checkpoint"]


def _state(q: QSGP, generator: torch.Generator) -> dict:
    """Everything a resumed run needs: the model's parameters, optimisers, generators."""
    assert q.features is not None and q.cov is not None and q.training is not None
    training = q.training
    return {
        "identity": training.run.identity(),
        "steps_done": training.steps_done,
        "history": list(training.history),
        "adagrad": training.adagrad,
        "adam": training.adam,
        "warm": None if training.warm is None else asdict(training.warm),
        "mean_weights": q.mean_weights,
        "cov": q.cov.state_dict(),
        "log_noise": q.log_noise,
        "kernel": q.kernel.state_dict(),
        "features": q.features.rff.state_dict(),
        "frozen": q.features.frozen_state(),
        "cv": None if q.cv is None else asdict(q.cv),
        "generator": generator.get_state(),
        "model_generator": q.generator.get_state(),
    }


def save_checkpoint(q: QSGP, path: Path, generator: torch.Generator) -> None:
    """Write the checkpoint of ``q``'s training run (and the generator's state) to ``path``."""
    save_state(path, "qsgp", "qsgp-run", _state(q, generator))


def load_checkpoint(
    q: QSGP,
    path: Path,
    run: QSGPRun,
    adagrad: SparseAdagrad,
    adam: torch.optim.Optimizer,
    generator: torch.Generator,
) -> tuple[int, list[dict[str, float]], WarmStart | None]:
    """Restore a checkpoint of ``run`` into ``q`` and the optimisers.

    Returns the steps taken, the history and what the run's warm start did.
    """
    state = load_state(path, "qsgp", "qsgp-run")
    saved = state.get("identity")
    mismatch = (
        "no run identity (written by an older pnsolve)"
        if not isinstance(saved, dict)
        else identity_mismatch(saved, run.identity())
    )
    if mismatch is not None:
        raise ValueError(
            f"checkpoint {str(path)!r} belongs to another run: {mismatch}; delete it or "
            "choose another checkpoint file"
        )
    assert q.features is not None and q.cov is not None and q.mean_weights is not None
    assert q.log_noise is not None
    with torch.no_grad():
        q.mean_weights.copy_(state["mean_weights"])
        q.cov.load_state_dict(state["cov"])
        q.log_noise.copy_(state["log_noise"])
        q.kernel.load_state_dict(state["kernel"])
        q.features.rff.load_state_dict(state["features"])
    q.features.load_frozen_state(state["frozen"])
    q.cv = None if state["cv"] is None else ControlVariates(**state["cv"])
    adagrad.load_state_dict(state["adagrad"])
    adam.load_state_dict(state["adam"])
    generator.set_state(state["generator"])
    q.generator.set_state(state["model_generator"])
    warm = state.get("warm")
    warmed = None if warm is None else WarmStart(**warm)
    return int(state["steps_done"]), list(state["history"]), warmed
