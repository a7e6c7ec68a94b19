"""Shared parts of ``bench_gpu.py``: the run context, sizes and budgets, timing, output.

The budget of a run counts from the import of this module (``T0``; ``make gpu-check``
leaves 15 s between the benchmark's budget and its hard limit for the imports before it).
"""

from __future__ import annotations

import datetime
import gc
import json
import math
import os
import resource
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

T0 = time.perf_counter()  # the budget counts from here (CUDA start-up included)

import torch

import pnsolve as pn
from pnsolve.kernels.backends.keops import keops_available
from pnsolve.kernels.backends.keops_probe import keops_runs_on

F32, F64 = torch.float32, torch.float64
DTYPES = (F32, F64)
LS, NOISE, RANK = 0.5, 0.1, 50
# n per size class, and section estimates in seconds (KeOps compilations included), as
# (cuda full, cuda quick, cpu full, cpu quick)
SIZES = {
    "dense": (20_000, 4_000, 2_000, 500),
    "free": (100_000, 20_000, 5_000, 1_000),
    "big": (1_000_000, 200_000, 20_000, 4_000),
    "love_t": (1_000, 500, 200, 100),
    "ski_t": (10_000, 2_000, 2_000, 500),
    "qsgp_m": (100_000, 10_000, 5_000, 1_000),
    "sgld": (20_000, 4_000, 1_000, 400),
    "sgld_iters": (10, 4, 6, 4),
}
ESTIMATES = {
    "cg": (30, 4, 35, 6),
    "kernel": (15, 3, 8, 5),
    "itergp": (12, 2, 9, 1),
    "qsgp": (6, 3, 4, 4),
    "sgld": (10, 4, 8, 3),
    "love": (50, 8, 20, 8),
}
# Filippone & Engler (2015) §5.2: "roughly ten thousand samples per day"
PAPER_S_PER_ITER = 86_400 / 10_000
PAPER_ESS = 1e-3  # "an effective sample size of roughly 0.1 %": 2.4 h per independent sample


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """Seconds of one ``fn()`` call (synchronised on CUDA) and its result."""
    gc.collect()
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def name_of(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass
class Ctx:
    """The run: device, mode, budget, results, and the figures later sections reuse."""

    device: torch.device
    quick: bool
    budget: float
    order: list[str]
    t0: float = T0
    keops: bool = False
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    current: str = ""
    rates: dict[tuple[str, torch.dtype], float] = field(default_factory=dict)  # entries/s
    big_product: dict[torch.dtype, float] = field(default_factory=dict)  # s at n = "big"

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def size(self, key: str, table: dict = SIZES) -> Any:
        return table[key][(0 if self.cuda else 2) + self.quick]

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.t0)

    def spare(self) -> float:
        """Seconds left after reserving the estimates of the sections still to come."""
        later = self.order[self.order.index(self.current) + 1 :]
        return self.left() - sum(self.size(s, ESTIMATES) for s in later)

    def afford(self, need: float, what: str, notes: list[str]) -> bool:
        """Whether an optional part of about ``need`` seconds fits; if not, say so."""
        if self.spare() >= need:
            return True
        notes.append(f"{what} skipped: time budget ({self.spare():.0f} s spare, needs ~{need:.0f})")
        return False

    def timed(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        return timed(fn, self.device)

    def medians(self, fns: dict[str, Callable[[], Any]], repeats: int = 3) -> dict[str, float]:
        """Median seconds of each ``fns[name]()``, round-robin after a warm-up round."""
        samples: dict[str, list[float]] = {name: [] for name in fns}
        for rnd in range(repeats + 1):
            for name, fn in fns.items():
                t, _ = self.timed(fn)
                if rnd:
                    samples[name].append(t)
        return {name: statistics.median(v) for name, v in samples.items()}

    def peak_reset(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def peak_mb(self) -> float:
        """CUDA: peak allocated since :meth:`peak_reset`; CPU: the process's peak RSS."""
        if self.cuda:
            return torch.cuda.max_memory_allocated(self.device) / 2**20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    def part(self, name: str, fn: Callable[[], Any]) -> None:
        """Run one part of the current section; a failure is printed and recorded."""
        try:
            fn()
        except Exception as exc:
            where = f"{self.current}/{name}" if name else self.current
            what = f"{where}: {type(exc).__name__}: {exc}"
            print(f"FAILED: {what}\n{traceback.format_exc()}", flush=True)
            self.results[self.current]["failed"].append(f"{what}\n{traceback.format_exc()}")

    def table(self, title: str, header: list[str], rows: list[list[Any]], notes=()) -> None:
        """Record a table of the current section and print it."""
        tab = {"title": title, "header": header, "rows": rows, "notes": list(notes)}
        self.results[self.current]["tables"].append(tab)
        print(markdown_table(tab), flush=True)


def uniform(n: int, d: int, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, d, generator=g, dtype=F64).to(device=device, dtype=dtype)


def normal(shape: tuple[int, ...], dtype, device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).to(device=device, dtype=dtype)


def rbf(device: torch.device | None = None) -> pn.kernels.RBF:
    """The benchmarks' RBF kernel, its parameters on ``device`` (docs/gpus.md: a kernel
    left on the CPU copies them to the data's device at every product)."""
    return pn.kernels.RBF(lengthscale=LS, outputscale=1.0).to(device)


def free_backend(ctx: Ctx) -> str:
    """The matrix-free backend of the largest runs: keops on CUDA, else chunked."""
    return "keops" if ctx.cuda and ctx.keops else "chunked"


def mem_label(ctx: Ctx) -> str:
    return "peak allocated MB" if ctx.cuda else "process peak RSS MB"


def fmt(c: Any) -> str:
    if c is None:
        return "–"
    return f"{c:.3g}" if isinstance(c, float) else str(c)


def markdown_table(tab: dict[str, Any]) -> str:
    lines = [f"\n### {tab['title']}\n", "| " + " | ".join(tab["header"]) + " |",
             "|" + "---|" * len(tab["header"])]  # fmt: skip
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in tab["rows"]]
    return "\n".join(lines + [""] * bool(tab["notes"]) + [f"- {s}" for s in tab["notes"]])


def jsonable(c: Any) -> Any:
    if isinstance(c, float) and not math.isfinite(c):
        return None
    if isinstance(c, dict):
        return {k: jsonable(v) for k, v in c.items()}
    return [jsonable(v) for v in c] if isinstance(c, list | tuple) else c


def meta(ctx: Ctx) -> dict[str, Any]:
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "pnsolve": pn.__version__}
    for mod in ("gpytorch", "linear_operator", "pykeops"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception as exc:  # optional
            versions[mod] = f"unavailable ({type(exc).__name__})"
    return {
        "device": torch.cuda.get_device_name(ctx.device) if ctx.cuda else "CPU (dry run)",
        "versions": versions, "dtypes": "float32, float64 (per row)",
        "mode": "quick" if ctx.quick else "full", "budget_s": ctx.budget, "keops": ctx.keops,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "fp32_matmul_precision": torch.backends.cuda.matmul.fp32_precision,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "keops_cache": os.environ.get("KEOPS_CACHE_FOLDER", "(pykeops default)"),
        "sizes": {k: ctx.size(k) for k in SIZES},
        "scaled_down": None if ctx.cuda else "CPU dry run: sizes scaled down from the CUDA "
        "sizes (n ÷ 10–50, --quick ÷ 40–250), one torch thread; not GPU numbers",
    }  # fmt: skip


def write(ctx: Ctx, out: Path) -> None:
    info = meta(ctx) | {"total_s": time.perf_counter() - ctx.t0}
    head = [f"# pnsolve GPU benchmarks ({info['mode']})\n",
            f"- device: {info['device']}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
            f"dtypes {info['dtypes']}; date {info['date']}",
            "- versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()),
            f"- budget {ctx.budget:.0f} s, total {info['total_s']:.0f} s; KeOps {ctx.keops}; "
            "sizes " + ", ".join(f"{k}={v}" for k, v in info["sizes"].items())]  # fmt: skip
    head += [f"- **{info['scaled_down']}**"] * bool(info["scaled_down"])
    head += [f"- note: {s}" for s in ctx.notes]
    body = []
    for name, res in ctx.results.items():
        body.append(f"\n## {name}: {res['status']} ({res['seconds']:.1f} s)")
        body += [f"\n```\nFAILED: {f}\n```" for f in res["failed"]]
        body += [markdown_table(t) for t in res["tables"]]
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_gpu.md").write_text("\n".join(head + body) + "\n")
    blob = jsonable({"meta": info, "notes": ctx.notes, "sections": ctx.results})
    (out / "bench_gpu.json").write_text(json.dumps(blob, indent=1, default=str) + "\n")


def probe_keops(ctx: Ctx) -> None:
    """Whether KeOps imports and runs one tiny product (compiles the float32 formula)."""
    if ctx.device.type not in ("cuda", "cpu") or not keops_available():
        ctx.notes.append("KeOps not used (not importable, or another device): chunked instead")
        return
    t0 = time.perf_counter()
    if not keops_runs_on(ctx.device):  # a child process: pykeops can crash compiling
        ctx.notes.append(
            f"KeOps imports but its probe formula failed on {ctx.device} in a child process "
            f"({time.perf_counter() - t0:.0f} s; see the log): chunked instead"
        )
        return
    try:
        X = torch.rand(64, 3, device=ctx.device)
        with torch.no_grad():
            op = rbf(X.device).linop(X, backend="keops")
            t, _ = ctx.timed(lambda: op @ torch.ones_like(X[:, :1]))
        ctx.keops = True
        ctx.notes.append(f"KeOps probe (float32 formula, compile or load): {t:.1f} s")
    except Exception as exc:
        ctx.notes.append(f"KeOps does not run ({type(exc).__name__}: {exc}); using chunked")
