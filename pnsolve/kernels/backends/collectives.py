"""Process-group helpers of the ``"distributed"`` backend: ranks, row partitions, collectives."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
import torch.distributed as dist

__all__ = ["all_reduce_", "collective", "is_lead", "partition", "require_process_group"]

T = TypeVar("T")


def require_process_group() -> tuple[int, int]:
    """``(rank, world size)`` of the initialised default group.

    Raises
    ------
    RuntimeError
        If torch.distributed is unavailable or its default process group is not
        initialised (the message says how to start one).
    """
    if not dist.is_available():
        raise RuntimeError('backend="distributed" needs torch.distributed, which this torch lacks')
    if not dist.is_initialized():
        raise RuntimeError(
            'backend="distributed" needs an initialised default process group: call '
            'torch.distributed.init_process_group("gloo" on CPUs, "nccl" on GPUs) in every '
            "process first (under torchrun: init_process_group(backend) reads its "
            "environment); a timeout= there bounds how long a rank waits for a failed one"
        )
    return dist.get_rank(), dist.get_world_size()


def is_lead(backend: str) -> bool:
    """Whether this process prints and writes files (all but ranks > 0 of ``"distributed"``)."""
    return backend != "distributed" or require_process_group()[0] == 0


def partition(n: int, world: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` row ranges of ``n`` rows over ``world`` ranks.

    Sizes differ by at most one (the first ``n mod world`` ranks get one more); ranks
    beyond ``n`` get empty ranges.
    """
    base, extra = divmod(n, world)
    bounds, start = [], 0
    for r in range(world):
        stop = start + base + (1 if r < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def collective(call: Callable[[], T], what: str) -> T:
    """Run a collective; a failure (a rank that died, a timeout) becomes one clear error."""
    try:
        return call()
    except RuntimeError as e:  # gloo/NCCL errors (DistBackendError is a RuntimeError)
        rank, world = dist.get_rank(), dist.get_world_size()
        raise RuntimeError(
            f'backend="distributed": {what} failed on rank {rank} of {world}: another rank '
            "failed, exited or disagreed, or the process group's timeout passed "
            f"({type(e).__name__}: {e})"
        ) from e


def all_reduce_(tensors: list[torch.Tensor]) -> None:
    """Sum each tensor over the ranks, in place, with one ``all_reduce`` of their concatenation."""
    if not tensors:
        return
    flat = torch.cat([t.reshape(-1) for t in tensors])
    collective(lambda: dist.all_reduce(flat), "all_reduce of a gradient")
    offset = 0
    for t in tensors:
        t.copy_(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()
