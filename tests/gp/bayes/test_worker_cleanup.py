"""Chain worker processes end when their parent dies (no orphans left computing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pnsolve.gp.bayes.chains import PARENT_POLL_SECONDS

pytestmark = [
    pytest.mark.cpu_only(reason="process management: no tensors on a device"),
    pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table in /proc"),
]

#: a run far longer than the test: two MH chains in two worker processes
SCRIPT = """
import os, torch
from pnsolve.gp.bayes import ChainConfig, sample_hyperparameters
if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 2, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(40, generator=g, dtype=torch.float64)
    print(os.getpid(), flush=True)
    sample_hyperparameters(X, y, ChainConfig(sampler="mh", iterations=1_000_000), chains=2,
                           generator=g, processes=2)
"""
#: seconds to wait for the workers to start, and for them to end after the parent died
START_SECONDS, END_SECONDS = 120.0, 20 * PARENT_POLL_SECONDS


def _workers(parent: int) -> list[int]:
    """Processes whose parent is ``parent`` and that run a spawned multiprocessing worker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and "spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; it only waits to be reaped


def test_chain_workers_end_when_their_parent_is_killed(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        parent = int(proc.stdout.readline())
        deadline = time.monotonic() + START_SECONDS
        workers: list[int] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = _workers(parent)
        assert len(workers) >= 2, "the chain workers did not start"
        os.kill(parent, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + END_SECONDS
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "orphaned chain workers still run"
    finally:
        if proc.poll() is None:
            proc.kill()
        for w in _workers(proc.pid):
            os.kill(w, signal.SIGKILL)
