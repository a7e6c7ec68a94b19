"""Run a function on several local processes inside a torch.distributed group (for tests).

:func:`run_ranks` spawns ``world`` fresh Python processes, initialises the default
process group in each (gloo over localhost by default, a free port, a collective
timeout), calls ``fn(rank, world, *args)`` and returns the ranks' results in rank
order. A rank that raises, exits or hangs ends the call with an error naming the rank
and carrying its traceback, never a hang: the group's timeout bounds every collective
and ``deadline`` bounds the whole run.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import pickle
import queue as queue_module
import socket
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["RankFailure", "run_ranks"]


class RankFailure(RuntimeError):
    """One or more ranks of :func:`run_ranks` raised, exited or timed out.

    Attributes
    ----------
    failures
        ``{rank: traceback text or reason}`` for each failed rank.
    """

    def __init__(self, failures: dict[int, str]) -> None:
        self.failures = failures
        text = "\n".join(f"--- rank {r} ---\n{why}" for r, why in sorted(failures.items()))
        super().__init__(f"ranks {sorted(failures)} failed:\n{text}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(
    rank: int,
    world: int,
    port: int,
    backend: str,
    timeout: float,
    threads: int,
    fn: Callable[..., Any],
    args: Sequence[Any],
    out: Any,
) -> None:
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(threads)
    try:
        dist.init_process_group(
            backend, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout)
        )
        try:
            result = fn(rank, world, *args)
        finally:
            dist.destroy_process_group()
        # plain pickle bytes: torch's queue reductions share memory that dies with the rank
        out.put((rank, True, pickle.dumps(result)))
    except BaseException:  # report everything, including SystemExit from the function
        out.put((rank, False, traceback.format_exc()))


def run_ranks(
    fn: Callable[..., Any],
    world: int = 2,
    *,
    args: Sequence[Any] = (),
    backend: str = "gloo",
    timeout: float = 60.0,
    deadline: float = 600.0,
    threads: int = 1,
) -> list[Any]:
    """Call ``fn(rank, world, *args)`` on ``world`` spawned processes; their results.

    Parameters
    ----------
    fn
        A module-level (importable, picklable) function; its return value must pickle.
    world
        Number of processes (ranks), ≥ 1.
    args
        Extra positional arguments (picklable), the same for every rank.
    backend
        torch.distributed backend (``"gloo"`` on CPUs, ``"nccl"`` with one GPU per rank).
    timeout
        Seconds any collective may wait (the process group's ``timeout``).
    deadline
        Seconds for the whole run; ranks still alive then are killed.
    threads
        ``torch.set_num_threads`` in each rank.

    Returns
    -------
    list
        ``fn``'s return values, rank 0 first.

    Raises
    ------
    RankFailure
        If a rank raised (its traceback is in the message), exited without a result, or
        the deadline passed.
    """
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world must be a positive int, got {world!r}")
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(
            target=_entry,
            args=(rank, world, port, backend, timeout, threads, fn, tuple(args), out),
            daemon=True,
        )
        for rank in range(world)
    ]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    failures: dict[int, str] = {}
    dead_since: dict[int, float] = {}
    end = time.monotonic() + deadline
    while len(results) + len(failures) < world:
        try:
            rank, ok, value = out.get(timeout=0.5)
        except queue_module.Empty:
            now = time.monotonic()
            pending = [r for r in range(world) if r not in results and r not in failures]
            for r in pending:
                if now > end:
                    failures[r] = f"no result within the deadline of {deadline} s"
                elif not procs[r].is_alive():
                    # a rank that died without reporting (its message gets 2 s to arrive)
                    if now - dead_since.setdefault(r, now) > 2.0:
                        failures[r] = f"exited with code {procs[r].exitcode} without a result"
            continue
        failures.pop(rank, None)
        if ok:
            results[rank] = pickle.loads(value)
        else:
            failures[rank] = value
    for p in procs:
        p.join(timeout=5.0)
        if p.is_alive():
            p.kill()
            p.join()
    if failures:
        raise RankFailure(failures)
    return [results[r] for r in range(world)]
