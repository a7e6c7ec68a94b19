"""Run a function on several local processes inside a torch.distributed group (for tests).

:func:`run_ranks` spawns ``world`` fresh Python processes, initialises the default
process group in each (gloo by default, meeting through a file in a temporary folder,
with a collective timeout), calls ``fn(rank, world, *args)`` and returns the ranks' results in rank
order. A rank that raises, exits or hangs ends the call with an error naming the rank
and carrying its traceback, never a hang: the group's timeout bounds every collective
and ``deadline`` bounds the whole run.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
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


def _entry(
    rank: int,
    world: int,
    folder: str,
    backend: str,
    timeout: float,
    threads: int,
    fn: Callable[..., Any],
    args: Sequence[Any],
) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    result = Path(folder) / f"rank{rank}.pkl"
    try:
        dist.init_process_group(
            backend,
            init_method=f"file://{Path(folder) / 'rendezvous'}",  # no port to collide on
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout),
        )
        try:
            value = (True, fn(rank, world, *args))
        finally:
            dist.destroy_process_group()
    except BaseException:  # report everything, including SystemExit from the function
        value = (False, traceback.format_exc())
    # the result goes through a file (written, then renamed): a rank that dies while
    # writing leaves nothing the caller could half-read
    part = result.with_suffix(".part")
    try:
        payload = pickle.dumps(value)
    except Exception:  # a result that does not pickle is this rank's failure
        payload = pickle.dumps((False, traceback.format_exc()))
    part.write_bytes(payload)
    os.replace(part, result)


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
    with tempfile.TemporaryDirectory(prefix="pnsolve-ranks-") as folder:
        procs = [
            ctx.Process(
                target=_entry,
                args=(rank, world, folder, backend, timeout, threads, fn, tuple(args)),
                daemon=True,
            )
            for rank in range(world)
        ]
        try:
            for p in procs:
                p.start()
            results, failures = _collect(procs, Path(folder), deadline)
        finally:  # also on Ctrl-C or an unreadable result: no rank outlives the call
            for p in procs:
                p.join(timeout=5.0)
                if p.is_alive():
                    p.kill()
                    p.join()
    if failures:
        raise RankFailure(failures)
    return [results[r] for r in range(world)]


def _collect(
    procs: list[Any], folder: Path, deadline: float
) -> tuple[dict[int, Any], dict[int, str]]:
    """Poll for every rank's result file; ranks that die or pass the deadline fail."""
    world = len(procs)
    results: dict[int, Any] = {}
    failures: dict[int, str] = {}
    dead_since: dict[int, float] = {}
    end = time.monotonic() + deadline
    while len(results) + len(failures) < world:
        now = time.monotonic()
        for r in range(world):
            if r in results or r in failures:
                continue
            path = folder / f"rank{r}.pkl"
            if path.exists():  # complete: written under another name, then renamed
                with path.open("rb") as fh:
                    ok, value = pickle.load(fh)
                (results if ok else failures)[r] = value
            elif now > end:
                failures[r] = f"no result within the deadline of {deadline} s"
            elif not procs[r].is_alive() and now - dead_since.setdefault(r, now) > 2.0:
                failures[r] = f"exited with code {procs[r].exitcode} without a result"
        time.sleep(0.05)
    return results, failures
