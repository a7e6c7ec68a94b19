"""Shared helpers for benchmark scripts: timing and peak-memory measurement.

Benchmarks report *ratios* measured side by side in one run; absolute times on
shared machines are noise.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "interleaved_medians",
    "load_average",
    "peak_rss_mb",
    "print_table",
    "ratio",
    "timeit",
]


def once(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of a single ``fn()`` call (after a garbage collection) and its result."""
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def exact_variances(gp: Any, kernel: Any, Xs: Any) -> tuple[float, float, Any, Any, Any]:
    """A fitted ``ExactGP``'s test variances: end to end, and the solve alone.

    Returns ``(s for posterior(Xs).var, s for the triangular solve given k(Xs, X),
    variances, k(Xs, X), k(Xs, Xs)'s diagonal)``; the two paths are checked to agree.
    """
    import torch

    t_post, var = once(lambda: gp.posterior(Xs).var)
    cross = kernel(Xs, gp.X)  # (t, n)
    prior = kernel.diag(Xs)

    def solve_only() -> Any:
        W = torch.linalg.solve_triangular(gp.L, cross.mT, upper=False)
        return prior - (W * W).sum(0)

    t_solve, var_solve = once(solve_only)
    assert torch.allclose(var_solve, var, rtol=1e-8, atol=1e-12)
    return t_post, t_solve, var, cross, prior


def timeit(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def interleaved_medians(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Median wall time (s) of each ``fns[name]()``, run round-robin after a warm-up round.

    Interleaving makes drift on a shared machine hit every contender alike.
    """
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for rnd in range(repeats + 1):  # round 0 is warm-up
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            if rnd:
                samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(v) for name, v in samples.items()}


def load_average() -> str:
    """The 1/5/15-minute load averages (other processes skew every timing), if known."""
    try:
        return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load average unknown"


def ratio(a: float, b: float) -> float:
    """``a / b`` guarded against zero."""
    return a / b if b > 0 else float("inf")


def _child(fn: Callable[[], Any], q: mp.Queue) -> None:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    q.put((base / 1024.0, peak / 1024.0))


def peak_rss_mb(fn: Callable[[], Any]) -> tuple[float, float]:
    """Run ``fn`` in a fresh process; return ``(baseline_mb, peak_mb)`` of its resident set.

    ``fn`` must be picklable (a module-level function or a ``functools.partial`` of one).
    The difference ``peak - baseline`` is the memory the call itself needed.
    """
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    p = ctx.Process(target=_child, args=(fn, q))
    p.start()
    out = q.get()
    p.join()
    return out


def print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    """Print a fixed-width table."""
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    print(f"\n== {title} ==")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:.3g}"
    return str(c)
