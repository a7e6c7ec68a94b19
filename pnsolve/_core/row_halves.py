"""Memory- or compute-bound CPU work in row parts on worker threads, each one-threaded.

Torch's MKL matrix–vector products use one core at the sizes of a dense solve or a
belief's factors (``n ≥ 2 000``); splitting the rows over two threads reads memory at
about 1.4× the rate (measured numbers in :class:`~pnsolve.linops.Dense`). A kernel
matrix's tile loop is the other case: its per-tile operations (a distance GEMM, ``exp``,
``addmm``; 512 × 512 entries) each start and join an OpenMP team, and on the 2-core
reference machine that got 1.0–1.3× one thread's throughput; the tile rows in two parts
on two threads, each running its operations one-threaded, got 1.3–1.65× (float64) and
1.4–2.7× (float32) the throughput of the unsplit loop (three runs, n = 8 192,
2026-11-29; docs/benchmarks.md).

The workers run with one intra-op thread each: they are started together, each sets its
own count to one (an OpenMP setting of that thread), and the thread that started them
then sets torch's process-wide default back as it was (``torch.set_num_threads`` also
stores the default that threads adopt on their first parallel operation). No caller's
thread count is ever changed.

Work is split only where it may leave the calling thread: CPU tensors without autograd
or functorch wrappers, and torch allowed at least two threads. Workers never split
again: called from a worker, the parts run there one after the other.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

__all__ = ["functorch_wrapped", "in_row_parts", "in_two_halves", "max_parts", "may_split"]

T = TypeVar("T")

_PREFIX = "pnsolve-rows"
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def max_parts() -> int:
    """The most parts work is split into: the CPUs this process may run on, at least two."""
    affinity = getattr(os, "sched_getaffinity", None)  # Linux: respects CPU sets
    cpus = len(affinity(0)) if affinity is not None else (os.cpu_count() or 2)
    return max(2, cpus)


def _pool() -> ThreadPoolExecutor:
    """The :func:`max_parts` worker threads, each one-threaded (started on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            default = torch.get_num_threads()
            workers = max_parts()
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=_PREFIX)
            # every worker at once: each start task holds its thread until all have started
            ready = threading.Barrier(workers)
            for future in [pool.submit(_one_threaded, ready) for _ in range(workers)]:
                future.result()
            torch.set_num_threads(default)  # the process-wide default, as it was
            atexit.register(pool.shutdown, wait=False)
            _POOL = pool
        return _POOL


def _one_threaded(ready: threading.Barrier) -> None:
    """A worker's start: one intra-op thread for everything it will run.

    The first ``get_num_threads`` initialises the thread's count from the default (torch
    does that once per thread, on first use); the count is set to one after it, so a
    later first use cannot reset it.
    """
    torch.get_num_threads()
    torch.set_num_threads(1)
    ready.wait()


def _in_worker() -> bool:
    """Whether the calling thread is one of the workers."""
    return threading.current_thread().name.startswith(_PREFIX)


def functorch_wrapped(t: torch.Tensor) -> bool:
    """Whether ``t`` is wrapped by a functorch transform (whose state is per thread)."""
    wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    return wrapped is not None and bool(wrapped(t))


def _plain(t: torch.Tensor) -> bool:
    """A tensor whose product may leave the calling thread: no autograd, no functorch."""
    return not t.requires_grad and t.device.type == "cpu" and not functorch_wrapped(t)


def may_split(*tensors: torch.Tensor) -> bool:
    """Whether work on ``tensors`` may run in row parts (see the module notes)."""
    return torch.get_num_threads() >= 2 and all(_plain(t) for t in tensors)


def in_row_parts(work: Callable[[slice], T], rows: int, parts: int, align: int = 1) -> list[T]:
    """``[work(s) for s in slices]`` over ``parts`` contiguous slices of ``range(rows)``.

    The slices start at multiples of ``align`` (a tile's rows) and are as equal as that
    allows; fewer parts are made where there are fewer aligned blocks, or CPUs. Every
    part runs on a worker thread with one intra-op thread while the caller waits. The
    slices are fixed by ``rows``, ``parts`` and ``align``, so results are reproducible
    run to run.
    """
    if rows < 0 or parts < 1 or align < 1:
        raise ValueError(f"need rows ≥ 0, parts ≥ 1, align ≥ 1; got {rows}, {parts}, {align}")
    blocks = -(-rows // align)
    parts = max(1, min(parts, blocks, max_parts()))
    bounds = [min(rows, (blocks * p // parts) * align) for p in range(parts + 1)]
    slices = [slice(bounds[p], bounds[p + 1]) for p in range(parts)]
    if _in_worker():
        return [work(s) for s in slices]
    futures = [_pool().submit(work, s) for s in slices]
    return [f.result() for f in futures]


def in_two_halves(work: Callable[[slice], T], rows: int) -> tuple[T, T]:
    """``(work(top), work(bottom))`` for the two halves of ``range(rows)``.

    ``work(top)`` runs on a worker thread (one-threaded) while the caller runs
    ``work(bottom)`` as it is (for products that use one core anyway, such as MKL's
    matrix–vector product at these sizes); the halves are fixed (``rows // 2``), so
    results are reproducible run to run.
    """
    half = rows // 2
    if _in_worker():
        return work(slice(0, half)), work(slice(half, rows))
    future = _pool().submit(work, slice(0, half))
    bottom = work(slice(half, rows))
    return future.result(), bottom
