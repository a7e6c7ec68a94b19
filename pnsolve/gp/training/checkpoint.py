r"""Checkpoint files of a training run: everything needed to continue bit-for-bit.

File layout (format 2): one ASCII header line ``pnsolve-checkpoint 2 <sha256>\n``
followed by the ``torch.save`` serialisation of a dict with the fields of
:class:`TrainingCheckpoint` (in its field order; the log as a list of dicts) and
``"format": 2``; the SHA-256 digest covers every byte after the header, so a truncated
or corrupted file is refused instead of silently changing the result of the resumed run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

from ..._core.statefile import identity_mismatch, load_verified, read_raw, write_checksummed
from .record import StepRecord

__all__ = ["TrainingCheckpoint", "load_checkpoint", "save_checkpoint"]

FORMAT = 2
_MAGIC = b"pnsolve-checkpoint"


@dataclass(frozen=True)
class TrainingCheckpoint:
    """What a checkpoint holds after a training step: enough to continue bit for bit.

    Fields may also be read mapping-style (``checkpoint["log"]``), as from the dict
    earlier versions of :func:`load_checkpoint` returned.

    Attributes
    ----------
    identity
        Everything that determines the trajectory (every config field, digests of the
        data and of the generator's initial state, ``run_info``); a resumed run must
        match it.
    model
        ``state_dict()`` of the trained module (raw kernel hyperparameters, raw noise).
    optimizer
        ``state_dict()`` of Adam (moments, step counts).
    estimator
        ``state_dict()`` of the gradient estimator (frozen draws, its generator's
        state); ``None`` for the exact estimator.
    generator
        State of the run's generator (``get_state()``, a CPU byte tensor).
    log
        The :class:`StepRecord` of every completed step.
    solutions
        The last step's solutions ``(n, 1 + s)`` (the next warm start), or ``None``.
    """

    identity: dict[str, object]
    model: Mapping[str, torch.Tensor]
    optimizer: dict[str, Any]
    estimator: dict[str, torch.Tensor] | None
    generator: torch.Tensor
    log: list[StepRecord]
    solutions: torch.Tensor | None

    def __getitem__(self, key: str) -> Any:
        if key not in _KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def payload(self) -> dict[str, Any]:
        """The serialised dict of format 2 (records as dicts, ``"format"`` last)."""
        state = {key: getattr(self, key) for key in _KEYS}
        state["log"] = [asdict(r) for r in self.log]
        state["format"] = FORMAT
        return state


_KEYS = tuple(f.name for f in fields(TrainingCheckpoint))


def save_checkpoint(path: str | os.PathLike, state: TrainingCheckpoint | Mapping[str, Any]) -> None:
    """Write ``state`` with a checksum, atomically (a temporary file renamed over ``path``).

    Parameters
    ----------
    path
        The file (its folder is created).
    state
        A :class:`TrainingCheckpoint`, or a mapping with its field names as keys.
    """
    if not isinstance(state, TrainingCheckpoint):
        state = TrainingCheckpoint(**{key: state[key] for key in _KEYS})
    write_checksummed(path, [_MAGIC, str(FORMAT).encode()], state.payload())


def load_checkpoint(path: str | os.PathLike) -> TrainingCheckpoint:
    """Read a checkpoint written by :func:`save_checkpoint`, verifying its checksum.

    Returns
    -------
    TrainingCheckpoint
        Tensors on the CPU.

    Raises
    ------
    ValueError
        Naming the file when it is unreadable, not a pnsolve training checkpoint,
        written by another format version, or corrupt/truncated (checksum mismatch).
    """
    name, raw = read_raw(path)
    header, sep, body = raw.partition(b"\n")
    fields = header.split(b" ")
    if not sep or len(fields) != 3 or fields[0] != _MAGIC:
        hint = " (an older pnsolve format)" if raw[:2] == b"PK" else ""
        raise ValueError(
            f"checkpoint {name} is not a pnsolve training checkpoint{hint}; delete it or "
            "choose another checkpoint file"
        )
    if fields[1] != str(FORMAT).encode():
        version = fields[1].decode("ascii", "replace")
        raise ValueError(
            f"checkpoint {name} has format {version}, this pnsolve reads format {FORMAT}; "
            "delete it to start the run over"
        )
    payload = load_verified(body, fields[2], name)
    if (
        not isinstance(payload, dict)
        or payload.get("format") != FORMAT
        or any(k not in payload for k in _KEYS)
    ):
        raise ValueError(f"checkpoint {name} is not a pnsolve training checkpoint")
    log = [_record(r) for r in payload["log"]]
    return TrainingCheckpoint(**{**{key: payload[key] for key in _KEYS}, "log": log})


#: identity entries stored as digests: a mismatch is reported without the values
_DIGESTS = {
    "data": "training inputs or targets differ",
    "generator": "initial state differs: another seed?",
}


def _identity_mismatch(saved: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """``None`` if the two identities agree, else a one-line list of the differing keys."""
    return identity_mismatch(saved, current, _DIGESTS)


def _record(r: Mapping[str, Any]) -> StepRecord:
    """A :class:`StepRecord` from its saved dict (lists back to tuples)."""
    params = tuple((str(name), tuple(values)) for name, values in r.get("parameters", ()))
    return StepRecord(**{**r, "lengthscale": tuple(r["lengthscale"]), "parameters": params})
