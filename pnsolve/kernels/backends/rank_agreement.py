"""Checks that the ranks of a distributed computation hold the same inputs and kernel.

Each rank reduces what it holds to a few integers (shapes and a BLAKE2b hash of the
bytes: exact, so equal tensors give equal prints on any hardware, and a NaN equals
itself) and one ``all_gather`` compares them. Every rank raises the same error, so no
rank is left waiting.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
import torch.distributed as dist

from ..kernel import Kernel
from .collectives import collective

__all__ = ["check_ranks_agree", "fingerprint", "ranks_agree_on"]


def _signed(data: bytes) -> int:
    return int.from_bytes(data, "little", signed=True)


def fingerprint(t: torch.Tensor | None) -> torch.Tensor:
    """Five int64 numbers: present, rows, elements and a 128-bit hash of the bytes.

    ``None`` gives zeros. Costs one pass over the bytes (a copy to the host first for a
    GPU tensor); done once per distributed operator, not per product. A host (CPU)
    tensor, whatever ``t``'s device: the caller moves the fingerprints for the gather.
    """
    if t is None:
        return torch.zeros(5, dtype=torch.int64, device="cpu")
    flat = t.detach().contiguous().reshape(-1).cpu()  # host round trip: hashing the bytes
    data: Any = flat.view(torch.uint8).numpy()  # hashed through the buffer protocol, no copy
    digest = hashlib.blake2b(data, digest_size=16).digest()
    rows = t.shape[0] if t.ndim else 1
    values = [1, rows, flat.numel(), _signed(digest[:8]), _signed(digest[8:])]
    return torch.tensor(values, dtype=torch.int64, device="cpu")


def _kernel_print(kernel: Kernel) -> torch.Tensor:
    """The kernel's class and settings (``repr``: e.g. ν) and its exact hyperparameters."""
    text = f"{type(kernel).__module__}.{type(kernel).__qualname__}:{kernel!r}"
    digest = _signed(hashlib.blake2b(text.encode(), digest_size=8).digest())
    # host round trip: the hyperparameters' bytes are hashed
    params = [p.detach().reshape(-1).to(torch.float64).cpu() for p in kernel.parameters()]
    vector = torch.cat(params) if params else torch.zeros(0, dtype=torch.float64, device="cpu")
    finite = int(bool(torch.isfinite(vector).all()))
    head = torch.tensor([digest, finite], dtype=torch.int64, device="cpu")
    return torch.cat([head, fingerprint(vector)[1:]])


def check_ranks_agree(kernel: Kernel, X1: torch.Tensor, X2: torch.Tensor | None) -> None:
    """Refuse, on every rank, inputs or a kernel that differ between ranks.

    Raises
    ------
    ValueError
        Naming the argument (``X1``, ``X2``, the kernel or its hyperparameters) and the
        ranks that differ from rank 0, or the ranks whose hyperparameters are not
        finite.
    """
    mine = torch.cat([fingerprint(X1), fingerprint(X2), _kernel_print(kernel)])
    mine = mine.to(X1.device)  # NCCL gathers device tensors
    world = dist.get_world_size()
    prints = [torch.empty_like(mine) for _ in range(world)]
    collective(lambda: dist.all_gather(prints, mine), "checking that the ranks agree")
    rows = torch.stack(prints).cpu()  # (world, 16): X1 [0:5], X2 [5:10], kernel [10:16]
    bad = [r for r in range(world) if int(rows[r, 11]) == 0]
    if bad:
        raise ValueError(
            f'backend="distributed": the kernel\'s hyperparameters are not finite on ranks {bad}'
        )
    for name, cols in (("X1", slice(0, 5)), ("X2", slice(5, 10)), ("kernel", slice(10, 11)),
                       ("kernel's hyperparameters", slice(12, 16))):  # fmt: skip
        differ = [r for r in range(world) if not torch.equal(rows[r, cols], rows[0, cols])]
        if differ:
            raise ValueError(
                f'backend="distributed": ranks {differ} hold another {name} than rank 0 '
                "(every rank must pass the same inputs and kernel; the right-hand sides "
                "of each product must be the same too, which is not checked)"
            )


def ranks_agree_on(value: object, what: str) -> None:
    """Raise, on every rank, if the ranks hold different ``value`` (compared with ``==``).

    ``value`` must pickle (e.g. a run's fingerprint, a file's digest or ``None``);
    ``what`` names it in the message. Needs an initialised default group.
    """
    values: list[object] = [None] * dist.get_world_size()
    collective(lambda: dist.all_gather_object(values, value), f"checking {what} on every rank")
    differ = [r for r, v in enumerate(values) if v != values[0]]
    if differ:
        raise ValueError(f'backend="distributed": ranks {differ} hold another {what} than rank 0')
