"""Per-chain checkpoint files of :func:`~pnsolve.gp.bayes.sample_hyperparameters`.

A file holds a chain's sampler state, both of its generators' states, the gradient
estimator's probes and warm starts, and a fingerprint of the run (data, settings,
model, seeds), so that a resumed chain continues into exactly the draws of an
uninterrupted one; a file of another run, another kind or a damaged one is refused
(:mod:`pnsolve._core.statefile`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ..._core.statefile import load_state, save_state, tensor_digest
from .hyperparameters import LogHyperparameters

__all__ = ["chain_path", "file_digest", "load_chain", "run_fingerprint", "save_chain"]


def chain_path(checkpoint: str | Path | None, chain: int) -> Path | None:
    """``<checkpoint>.chain<c>.pt`` (its folder created), or ``None`` without a prefix."""
    if checkpoint is None:
        return None
    base = Path(checkpoint)
    base.parent.mkdir(parents=True, exist_ok=True)
    return base.with_name(f"{base.name}.chain{chain}.pt")


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes (ranks compare it before each reads a checkpoint)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_fingerprint(
    X: torch.Tensor, y: torch.Tensor, config: Any, params: LogHyperparameters, seeds: list[int]
) -> str:
    """SHA-256 of the data, the (dataclass) ``config``, the model and the chain seeds."""
    h = hashlib.sha256()
    h.update(tensor_digest(X, y).encode())
    h.update(json.dumps(asdict(config), sort_keys=True).encode())
    h.update(repr((params, params.priors, seeds)).encode())
    return h.hexdigest()


def save_chain(
    path: Path,
    tag: str,
    state: Any,
    g_noise: torch.Generator,
    g_grad: torch.Generator,
    gradient: Any,
    seconds: float,
) -> None:
    """Write a chain's state atomically (a temporary file, then a rename)."""
    payload = {
        "state": asdict(state),
        "g_noise": g_noise.get_state(),
        "g_grad": g_grad.get_state(),
        "gradient": None if gradient is None else gradient.state_dict(),
        "seconds": seconds,
    }
    save_state(path, "chain", tag, payload)


def _to(value: Any, device: torch.device) -> Any:
    """``value`` with its tensors (also inside a list) on ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list):
        return [_to(v, device) for v in value]
    return value


def load_chain(
    path: Path,
    tag: str,
    state: Any,
    g_noise: torch.Generator,
    g_grad: torch.Generator,
    gradient: Any,
) -> float:
    """Restore ``state``, the generators and ``gradient`` in place; return the seconds so far.

    Raises
    ------
    ValueError
        If the file belongs to another run (its fingerprint differs from ``tag``), is
        not a chain checkpoint, or is corrupt or truncated.
    """
    payload = load_state(path, "chain", tag)
    device = state.theta.device  # the files hold CPU tensors: back to the chain's device
    for key, value in payload["state"].items():
        setattr(state, key, _to(value, device))
    g_noise.set_state(payload["g_noise"])
    g_grad.set_state(payload["g_grad"])
    if gradient is not None:
        gradient.load_state_dict(payload["gradient"])
    return float(payload["seconds"])
