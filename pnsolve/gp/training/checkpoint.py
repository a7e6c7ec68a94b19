"""Checkpoint files of a training run: everything needed to continue bit-for-bit.

File layout (format 2): one ASCII header line ``pnsolve-checkpoint 2 <sha256>\\n``
followed by the ``torch.save`` serialisation of the state; the SHA-256 digest covers
every byte after the header, so a truncated or corrupted file is refused instead of
silently changing the result of the resumed run.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from .record import StepRecord

__all__ = ["load_checkpoint", "save_checkpoint"]

FORMAT = 2
_MAGIC = b"pnsolve-checkpoint"
_KEYS = ("identity", "model", "optimizer", "estimator", "generator", "log", "solutions")


def _tensor_digest(*tensors: torch.Tensor) -> str:
    """SHA-256 over dtypes, shapes and raw bytes of ``tensors`` (any device)."""
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Write ``state`` with a checksum, atomically (a temporary file renamed over ``path``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    payload = dict(state)
    payload["format"] = FORMAT
    payload["log"] = [asdict(r) for r in state["log"]]
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    body = buffer.getvalue()
    header = b"%s %d %s\n" % (_MAGIC, FORMAT, hashlib.sha256(body).hexdigest().encode())
    with tmp.open("wb") as fh:
        fh.write(header)
        fh.write(body)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`, verifying its checksum.

    Raises
    ------
    ValueError
        Naming the file when it is unreadable, not a pnsolve training checkpoint,
        written by another format version, or corrupt/truncated (checksum mismatch).
    """
    name = repr(str(path))
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"checkpoint {name} is not readable: {exc.strerror or exc}") from exc
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
    if hashlib.sha256(body).hexdigest().encode() != fields[2]:
        raise ValueError(
            f"checkpoint {name} is corrupt or truncated (checksum mismatch); delete it to "
            "start the run over"
        )
    try:
        # weights_only: plain containers and tensors only, no arbitrary unpickling
        payload = torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    except Exception as exc:  # any unreadable body is the same user error
        message = " ".join(str(exc).split())[:200]
        raise ValueError(f"checkpoint {name} is not readable: {message}") from exc
    if (
        not isinstance(payload, dict)
        or payload.get("format") != FORMAT
        or any(k not in payload for k in _KEYS)
    ):
        raise ValueError(f"checkpoint {name} is not a pnsolve training checkpoint")
    payload["log"] = [
        StepRecord(**{**r, "lengthscale": tuple(r["lengthscale"])}) for r in payload["log"]
    ]
    return payload


#: identity entries stored as digests: a mismatch is reported without the values
_DIGESTS = {
    "data": "training inputs or targets differ",
    "generator": "initial state differs: another seed?",
}


def _identity_mismatch(saved: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """``None`` if the two identities agree, else a one-line list of the differing keys."""
    diffs = []
    for key in sorted(set(saved) | set(current), key=lambda k: (k in _DIGESTS, k)):
        old, new = saved.get(key, "<absent>"), current.get(key, "<absent>")
        if old == new:
            continue
        if key in _DIGESTS:
            diffs.append(f"{key} ({_DIGESTS[key]})")
        else:
            diffs.append(f"{key} (checkpoint: {old!r}, this run: {new!r})")
    return "; ".join(diffs) if diffs else None
