"""Checkpoint files of a training run: everything needed to continue bit-for-bit."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from .record import StepRecord

__all__ = ["load_checkpoint", "save_checkpoint"]

FORMAT = 1


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (a temporary file renamed over ``path``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    payload = dict(state)
    payload["format"] = FORMAT
    payload["log"] = [asdict(r) for r in state["log"]]
    torch.save(payload, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Raises
    ------
    ValueError
        Naming ``checkpoint`` when the file is not a pnsolve training checkpoint.
    """
    try:
        # weights_only: plain containers and tensors only, no arbitrary unpickling
        payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # any unreadable file is the same user error
        raise ValueError(f"checkpoint {str(path)!r} is not readable: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"checkpoint {str(path)!r} is not a pnsolve training checkpoint")
    payload["log"] = [
        StepRecord(**{**r, "lengthscale": tuple(r["lengthscale"])}) for r in payload["log"]
    ]
    return payload
