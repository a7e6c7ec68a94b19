"""Memory-bound CPU work in two row halves, one on a worker thread.

Torch's MKL matrix–vector products use one core at the sizes of a dense solve or a
belief's factors (``n ≥ 2 000``); splitting the rows over the two threads of this
module reads memory at about 1.4× the rate (measured numbers in
:class:`~pnsolve.linops.Dense`). One worker thread is shared by every caller, created
on first use; the calling thread computes the bottom half meanwhile.

Work is split only where it may leave the calling thread: CPU tensors without autograd
or functorch wrappers, and torch allowed at least two threads.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

__all__ = ["in_two_halves", "may_split"]

T = TypeVar("T")

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The one worker thread that computes the top row half (created on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pnsolve-rows")
            atexit.register(_POOL.shutdown, wait=False)
        return _POOL


def _plain(t: torch.Tensor) -> bool:
    """A tensor whose product may leave the calling thread: no autograd, no functorch."""
    if t.requires_grad or t.device.type != "cpu":
        return False
    wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    return wrapped is None or not wrapped(t)


def may_split(*tensors: torch.Tensor) -> bool:
    """Whether work on ``tensors`` may run in two row halves (see the module notes)."""
    return torch.get_num_threads() >= 2 and all(_plain(t) for t in tensors)


def in_two_halves(work: Callable[[slice], T], rows: int) -> tuple[T, T]:
    """``(work(top), work(bottom))`` for the two halves of ``range(rows)``.

    ``work(top)`` runs on the worker thread while the caller runs ``work(bottom)``;
    the halves are fixed (``rows // 2``), so results are reproducible run to run.
    """
    half = rows // 2
    future = _pool().submit(work, slice(0, half))
    bottom = work(slice(half, rows))
    return future.result(), bottom
