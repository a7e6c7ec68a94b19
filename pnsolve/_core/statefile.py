r"""Checksummed state files of resumable runs (SGLD/MH chains, QSGP training).

Layout: one ASCII header line ``pnsolve-state 1 <kind> <sha256>\n`` followed by the
``torch.save`` serialisation of ``{"tag": ..., "payload": ...}``; the digest covers every
byte after the header. A file written by another run (another ``tag``: data, settings
or seed differ), by another tool, or cut short is refused with a message naming it,
instead of silently changing the resumed run.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "DigestCache",
    "identity_mismatch",
    "load_state",
    "load_verified",
    "read_raw",
    "save_state",
    "tensor_digest",
    "version_counter",
    "write_checksummed",
]


def tensor_digest(*tensors: torch.Tensor) -> str:
    """SHA-256 over dtypes, shapes and raw bytes of ``tensors`` (any device; order-sensitive).

    Identifies the data a run or a cached state belongs to (run fingerprints).
    """
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()  # host round trip: hashing the bytes
        h.update(f"{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def version_counter(t: torch.Tensor) -> int:
    """``t._version`` (bumped by every in-place write), ``-1`` for inference tensors.

    Tensors made under ``torch.inference_mode()`` track no version (reading it raises);
    they cannot be written outside that mode.
    """
    return -1 if t.is_inference() else t._version


class DigestCache:
    """:func:`tensor_digest` that remembers the last tensors it hashed.

    Called again with the very same tensor objects, none modified in place since
    (their version counters unchanged), it returns the stored digest in ``O(1)``;
    anything else is hashed. For loops that pass the same data every step.
    """

    def __init__(self) -> None:
        self._last: tuple[tuple[torch.Tensor, ...], tuple[int, ...], str] | None = None

    def __call__(self, *tensors: torch.Tensor) -> str:
        last = self._last
        versions = tuple(version_counter(t) for t in tensors)
        if (
            last is not None
            and len(last[0]) == len(tensors)
            and all(a is b for a, b in zip(last[0], tensors, strict=True))
            and last[1] == versions
        ):
            return last[2]
        digest = tensor_digest(*tensors)
        self._last = (tensors, versions, digest)
        return digest


_MAGIC = b"pnsolve-state"
_FORMAT = b"1"


def save_state(path: str | os.PathLike, kind: str, tag: str, payload: dict[str, Any]) -> None:
    """Write ``payload`` (tensors and plain containers) atomically with a checksum.

    Parameters
    ----------
    path
        The file (its folder is created).
    kind
        One word naming the file's kind (``"chain"``, ``"qsgp"``); checked on loading.
    tag
        Fingerprint of the run (data, settings, seeds); checked on loading.
    payload
        The state.
    """
    if not kind.isidentifier():
        raise ValueError(f"kind must be one word, got {kind!r}")
    write_checksummed(path, [_MAGIC, _FORMAT, kind.encode()], {"tag": tag, "payload": payload})


def write_checksummed(path: str | os.PathLike, header: list[bytes], state: object) -> None:
    """Write ``torch.save(state)`` after the header line ``<header words> <sha256>``, atomically.

    The digest covers every byte after the header line. The file is written to a
    temporary name next to ``path``, flushed to disk and renamed over ``path``, so a
    crash leaves the old file or the new one, never half of one. The folder is created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    body = buffer.getvalue()
    digest = hashlib.sha256(body).hexdigest().encode()
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as fh:
        fh.write(b" ".join([*header, digest]) + b"\n")
        fh.write(body)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def identity_mismatch(
    saved: Mapping[str, object], current: Mapping[str, object], digests: Mapping[str, str]
) -> str | None:
    """``None`` if two run identities agree, else a one-line list of what differs.

    Keys in ``digests`` hold digests (of data, of a generator's state): a difference is
    reported with the explanation ``digests[key]`` instead of the values; they come last.
    A key present on one side only counts as ``"<absent>"`` on the other.
    """
    diffs = []
    for key in sorted(set(saved) | set(current), key=lambda k: (k in digests, k)):
        old, new = saved.get(key, "<absent>"), current.get(key, "<absent>")
        if old == new:
            continue
        if key in digests:
            diffs.append(f"{key} ({digests[key]})")
        else:
            diffs.append(f"{key} (checkpoint: {old!r}, this run: {new!r})")
    return "; ".join(diffs) if diffs else None


def load_state(path: str | os.PathLike, kind: str, tag: str) -> dict[str, Any]:
    """Read a file of :func:`save_state`, checking its kind, checksum and run.

    Returns
    -------
    dict
        The payload (tensors on the CPU).

    Raises
    ------
    ValueError
        Naming the file when it is unreadable, not a pnsolve ``kind`` file, corrupt or
        truncated (checksum mismatch), or written by another run.
    """
    name, raw = read_raw(path)
    header, sep, body = raw.partition(b"\n")
    fields = header.split(b" ")
    if not sep or len(fields) != 4 or fields[0] != _MAGIC or fields[2] != kind.encode():
        raise ValueError(
            f"checkpoint {name} is not a pnsolve {kind} checkpoint; delete it or choose "
            "another checkpoint file"
        )
    state = load_verified(body, fields[3] if fields[1] == _FORMAT else b"", name)
    if not isinstance(state, dict) or state.get("tag") != tag:
        raise ValueError(
            f"checkpoint {name} belongs to another run (data, settings or seed differ); "
            "delete it or choose another checkpoint file"
        )
    return state["payload"]


def read_raw(path: str | os.PathLike) -> tuple[str, bytes]:
    """``(repr of the path, its bytes)``; an unreadable file is a ``ValueError`` naming it."""
    name = repr(str(path))
    try:
        return name, Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"checkpoint {name} is not readable: {exc.strerror or exc}") from exc


def load_verified(body: bytes, digest: bytes, name: str) -> Any:
    """``torch.load`` of ``body`` (``weights_only``) after checking its SHA-256 ``digest``.

    Raises
    ------
    ValueError
        Naming the file (``name``) when the digest does not match (corrupt or
        truncated) or the body does not load.
    """
    if hashlib.sha256(body).hexdigest().encode() != digest:
        raise ValueError(
            f"checkpoint {name} is corrupt or truncated (checksum mismatch); delete it to "
            "start the run over"
        )
    try:
        # weights_only: tensors and plain containers only, no arbitrary unpickling
        return torch.load(io.BytesIO(body), map_location="cpu", weights_only=True)
    except Exception as exc:  # any unreadable body is the same user error
        message = " ".join(str(exc).split())[:200]
        raise ValueError(f"checkpoint {name} is not readable: {message}") from exc
