"""Shared helpers for benchmark scripts: timing, peak memory, resumable studies.

Benchmarks report *ratios* measured side by side in one run; absolute times on
shared machines are noise. The long studies (``make bench-studies``) save each
finished unit of work with :class:`ResultStore`, so that a rerun skips it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import gc
import hashlib
import io
import json
import multiprocessing as mp
import os
import pickle
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "RESULTS_DIR",
    "ResultStore",
    "add_resume_arguments",
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


def interleaved_samples(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: bool = True
) -> dict[str, list[float]]:
    """Wall times (s) of each ``fns[name]()`` per round, run round-robin after a warm-up.

    Round ``i`` of every contender ran back to back, so per-round ratios cancel the
    drift of a shared machine between rounds. ``warmup=False`` skips the warm-up round.
    """
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for rnd in range(0 if warmup else 1, repeats + 1):  # round 0 is warm-up
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            if rnd:
                samples[name].append(time.perf_counter() - t0)
    return samples


def interleaved_medians(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: bool = True
) -> dict[str, float]:
    """Median wall time (s) of each ``fns[name]()``, run round-robin after a warm-up round.

    Interleaving makes drift on a shared machine hit every contender alike.
    ``warmup=False`` skips the warm-up round (for long runs warmed up otherwise).
    """
    samples = interleaved_samples(fns, repeats, warmup)
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


T = TypeVar("T")

#: Where the studies keep their results: one JSON-lines file per script.
RESULTS_DIR = Path(__file__).resolve().parents[1] / "outputs" / "bench-studies"


def add_resume_arguments(parser: Any) -> None:
    """Add ``--fresh`` and ``--results-dir`` (see :class:`ResultStore`) to an argparse parser."""
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="recompute every unit (the old results file is kept as *.jsonl.bak)",
    )
    parser.add_argument(
        "--results-dir",
        default=None,
        help=f"folder of the resumable results files (default {RESULTS_DIR})",
    )


class ResultStore:
    """Finished units of a study, one JSON line each, so that a rerun skips them.

    The file is ``<directory>/<script stem>.jsonl`` (``-quick.jsonl`` when
    ``config["quick"]`` is true). A record holds the script's name, the date
    (YYYY-MM-DD), the unit's key, the run's configuration and the unit's value: as
    JSON when the value survives a JSON round trip unchanged, else pickled (base64).
    A unit is looked up by its key *and* the configuration, so changing an option
    recomputes; a change to the library is not detected (use ``fresh``).

    Parameters
    ----------
    script : str or Path
        The study script (``__file__``); its file name is recorded.
    config : Mapping, optional
        The options the results depend on (JSON-serialisable; others are ``str``-ed).
    directory : str or Path, optional
        Folder of the results file (default :data:`RESULTS_DIR`).
    fresh : bool
        Ignore saved results: the file is moved to ``*.jsonl.bak`` and started over.
    """

    def __init__(
        self,
        script: str | Path,
        config: Mapping[str, Any] | None = None,
        *,
        directory: str | Path | None = None,
        fresh: bool = False,
    ) -> None:
        self.script = Path(script).name
        self.config = json.loads(json.dumps(dict(config or {}), sort_keys=True, default=str))
        stem = Path(script).stem + ("-quick" if self.config.get("quick") else "")
        self.path = Path(directory or RESULTS_DIR) / f"{stem}.jsonl"
        self.computed = 0
        self.loaded = 0
        self._done: dict[str, dict[str, Any]] = {}
        self.parts = self.path.with_suffix(".parts")
        if fresh:
            shutil.rmtree(self.parts, ignore_errors=True)
            if self.path.exists():
                self.path.replace(self.path.with_suffix(".jsonl.bak"))
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by an interruption
                    continue
                if rec.get("config") == self.config:
                    self._done[rec["key"]] = rec

    @classmethod
    def from_args(
        cls, script: str | Path, args: Any, *, ignore: tuple[str, ...] = ()
    ) -> ResultStore:
        """A store for a script's parsed ``args`` (from :func:`add_resume_arguments`).

        Every option except ``fresh``, ``results_dir`` and ``ignore`` is part of the
        configuration.
        """
        skip = {"fresh", "results_dir", *ignore}
        config = {k: v for k, v in vars(args).items() if k not in skip}
        return cls(script, config, directory=args.results_dir, fresh=args.fresh)

    def checkpoint(self, name: str) -> Path:
        """A path prefix for a unit's own checkpoints (long chains), private to this config.

        The file name is a digest of the configuration and ``name`` (which should hold
        every option the checkpointed run depends on); it lies in ``<stem>.parts/``
        next to the results file, which ``fresh`` removes.
        """
        text = json.dumps([self.config, name], sort_keys=True, default=str)
        return self.parts / hashlib.sha256(text.encode()).hexdigest()[:16]

    @staticmethod
    def key(*parts: Any) -> str:
        """A deterministic key from the parts that identify a unit (``str``-ed, ``/``-joined)."""
        return "/".join(str(p) for p in parts)

    def __contains__(self, key: str) -> bool:
        return key in self._done

    def get(self, key: str) -> Any:
        """The saved value of a finished unit (``KeyError`` if there is none)."""
        rec = self._done[key]
        if "pickle" in rec:
            return pickle.loads(base64.b64decode(rec["pickle"]))
        return rec["value"]

    def put(self, key: str, value: Any, seconds: float | None = None) -> None:
        """Save a finished unit's value (one line, flushed to disk)."""
        rec: dict[str, Any] = {
            "script": self.script,
            "date": datetime.date.today().isoformat(),
            "key": key,
            "config": self.config,
            "seconds": seconds,
        }
        try:
            text = json.dumps(value, allow_nan=False)
            same = json.loads(text) == value
        except (TypeError, ValueError):
            same = False
        if same:
            rec["value"] = json.loads(text)  # a copy: the caller may change ``value``
        else:
            try:
                rec["pickle"] = base64.b64encode(pickle.dumps(value)).decode("ascii")
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                print(f"{self.script}: unit {key} not saved ({exc})", file=sys.stderr)
                return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(rec, ensure_ascii=False) + "\n"
        if self.path.exists() and self.path.stat().st_size:
            with self.path.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":  # after a line cut short by an interruption
                    line = "\n" + line
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self._done[key] = rec

    def unit(self, key: str, compute: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``compute(*args, **kwargs)``, or the value saved for ``key`` by an earlier run."""
        if key in self._done:
            self.loaded += 1
            return self.get(key)
        t0 = time.perf_counter()
        value = compute(*args, **kwargs)
        self.put(key, value, time.perf_counter() - t0)
        self.computed += 1
        return value

    def printed_unit(self, key: str, compute: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`unit` for a ``compute`` that prints its own tables.

        What it prints is saved with its value and printed again when the unit is loaded.
        """
        if key in self._done:
            value, text = self.unit(key, compute, *args, **kwargs)
            sys.stdout.write(text)
            return value
        buffer = io.StringIO()
        with contextlib.redirect_stdout(_Tee(sys.stdout, buffer)):
            value, text = self.unit(key, lambda: (compute(*args, **kwargs), buffer.getvalue()))
        return value

    def summary(self) -> str:
        """One line: units loaded and computed, and the file."""
        return f"results: {self.loaded} unit(s) reused, {self.computed} computed, {self.path}"


class _Tee(io.TextIOBase):
    """A text stream writing to two others (the console and a buffer)."""

    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()
