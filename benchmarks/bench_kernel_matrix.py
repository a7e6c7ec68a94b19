"""KernelMatrix throughput and memory, as ratios measured side by side in one run.

Prints, for an RBF kernel with d = 3:

* chunked matvec throughput (kernel entries/s) ÷ ``torch.exp`` throughput (targets: ≥ 0.5
  in float32, ≥ 0.65 in float64; the median of per-round ratios, exp timed right before
  each matvec in the same round, with the range over rounds), on uniform inputs in
  [0, 1]³ with lengthscale 0.3 (exponents ≥ −17) and on Gaussian inputs with
  lengthscale 0.3 (exponents down to about −500: below float32's ``log(tiny) ≈
  −87.3``, where torch's ``exp`` leaves its fast path; the tile code clamps the exponent
  there, kernels/_exp.py);
* where the time goes: the same tile loop stopped after each stage (distance GEMM, the
  exponent clamp, ``exp``, the ``tile @ V`` GEMM), one-threaded like each part of the
  chunked product (its tile rows run in parts on one-threaded worker threads,
  ``_core/row_halves.py``), timed interleaved in one process; each stage's cost is the
  difference of neighbouring loops, the Python/tile overhead is the loop with no
  arithmetic;
* chunked ÷ raw pykeops ``LazyTensor`` throughput for the same kernel (target ≥ 1.5 on CPU),
* peak memory of a full chunked matvec at n = 10⁵ (fresh process),
* at n = 10⁶: time and memory of a 2048-row slice ``K(X[:2048], X) @ v``, extrapolated to a
  full matvec (no n × n object is ever formed).

All timings are medians of interleaved rounds (``_common.interleaved_samples``); the
load average is printed with them. Load from other processes takes a core from one of
the chunked product's two parts (the product waits for the slower) while the streaming
``exp`` shares it out: compare ratios at low load.

Where the time goes (2-core AMD EPYC, L2 1 MiB per core, 512 × 512 tiles, one thread,
ns per entry, 2026-11-29): float32 distance GEMM 0.27, clamp 0.05, ``exp`` 0.90,
``tile @ V`` 0.12, Python/tile overhead 0.01; float64 0.49, (no clamp), 1.79, 0.12.
``exp`` is 65–75 % of a matvec; the distance GEMM (d = 3: five columns, a pure write of
the tile) is most of the rest. Two one-threaded parts would then give 1.47 (float32) and
0.84 (float64) G entries/s; the same run measured 0.92–0.95 and 0.81–0.82: float64 is
at its stage sum, float32 at about two thirds of it: one thread's float32 tile loop ran
16 % slower while the other core ran ``exp`` (shared core resources; float64 5 %), and
1024 × 1024 tiles, a quarter of the Python per entry, gained only 6 %. Without the clamp, float32
exponents below −87.3 cost 20–50× an ordinary ``exp``.

Usage: ``python benchmarks/bench_kernel_matrix.py [--quick]``."""

from __future__ import annotations

import argparse
import functools
import math
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (
    interleaved_medians,
    interleaved_samples,
    load_average,
    peak_rss_mb,
    print_table,
    ratio,
    timeit,
)

import pnsolve as pn
from pnsolve.kernels._exp import exp_floor
from pnsolve.kernels.backends.tiling import DEFAULT_TILE


def _data(
    n: int, dtype: torch.dtype, seed: int = 0, gaussian: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = (torch.randn if gaussian else torch.rand)(n, 3, generator=g, dtype=dtype)
    v = torch.randn(n, 1, generator=g, dtype=dtype)
    return X, v


#: The throughput cases: (label, Gaussian inputs?, lengthscale).
CASES = (("unif, l=0.3", False, 0.3), ("gauss, l=0.3", True, 0.3))
#: Stages of the tile loop, cumulative (see :func:`_stage_loop`).
STAGES = ("overhead", "distance GEMM", "clamp", "exp", "tile @ V")


def _stage_loop(
    A: torch.Tensor, B: torch.Tensor, v: torch.Tensor, tile: tuple[int, int], upto: int
) -> torch.Tensor:
    """The chunked RBF matvec's tile loop (tiling.tiled_matmat) up to stage ``upto``.

    ``A`` ``(n, 5)`` and ``B`` ``(n, 5)`` are the RBF's augmented operands, ``v`` ``(n,
    1)``; ``upto`` counts the stages of :data:`STAGES` after the bare loop (0: slicing
    only, 4: the whole matvec).
    """
    n, (tr, tc) = A.shape[0], tile
    floor = exp_floor(A.dtype)
    out = torch.zeros(n, 1, dtype=A.dtype)
    buf = torch.empty(tr * tc, dtype=A.dtype)
    for r0 in range(0, n, tr):
        r1 = min(n, r0 + tr)
        a, acc = A[r0:r1], out[r0:r1]
        for c0 in range(0, n, tc):
            c1 = min(n, c0 + tc)
            s = buf[: (r1 - r0) * (c1 - c0)].view(r1 - r0, c1 - c0)
            if upto >= 1:
                torch.mm(a, B[c0:c1].mT, out=s)
            if upto >= 2 and floor > -math.inf:  # float64: not floored
                s.clamp_min_(floor)
            if upto >= 3:
                s.exp_()
            if upto >= 4:
                acc.addmm_(s, v[c0:c1])
    return out


def throughputs(n: int, dtype: torch.dtype, rounds: int) -> dict[str, float]:
    """Entries/s of the chunked RBF matvec (d = 3) in each of :data:`CASES` and of
    ``torch.exp`` streaming over a large array into a preallocated output, their ratio,
    ``exp_`` on a cache-resident tile-sized buffer, and seconds per entry of each stage of
    :data:`STAGES` (Gaussian inputs, lengthscale 0.3, one part).

    The exp bound runs in the same rounds as the matvecs, right before them, and the
    ratio is the median of the per-round ratios (``"ratio:<case>"``, with its smallest
    and largest round in ``"low:"``/``"high:"``): the streaming ``exp`` follows the shared
    host's speed, which moved 2× between runs on 2026-11-29 (float64 1.18 → 0.61 G/s)
    while each round's ratio stayed put. The stage loops run in a group of their own.
    """
    big = torch.zeros(2**24, dtype=dtype)
    out = torch.empty_like(big)
    tile = torch.zeros(256 * 1024, dtype=dtype)
    reps = 64

    def tile_exp() -> None:
        for _ in range(reps):
            tile.zero_().exp_()

    def tile_zero() -> None:
        for _ in range(reps):
            tile.zero_()

    fns: dict[str, Callable[[], object]] = {"exp": lambda: torch.exp(big, out=out)}
    for label, gaussian, ls in CASES:
        X, v = _data(n, dtype, gaussian=gaussian)
        k = pn.kernels.RBF(lengthscale=ls).requires_grad_(False)
        K = pn.kernels.KernelMatrix(k, X, backend="chunked")
        fns[label] = functools.partial(K.__matmul__, v)
    with torch.no_grad():
        samples = interleaved_samples(fns, rounds)
        t_cache = interleaved_medians({"tile_exp": tile_exp, "tile_zero": tile_zero}, rounds)
    (A,), (B,) = k.tile_operands(X, left=True), k.tile_operands(X, left=False)
    stages = {
        stage: functools.partial(_stage_loop, A, B, v, DEFAULT_TILE, i)
        for i, stage in enumerate(STAGES)
    }
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each part of the chunked product runs its tiles
    try:
        with torch.no_grad():
            t = interleaved_medians(stages, rounds)
    finally:
        torch.set_num_threads(threads)
    res = {"exp": big.numel() / statistics.median(samples["exp"])}
    for label, _, _ in CASES:
        res[label] = n * n / statistics.median(samples[label])
        per_round = [
            (n * n / tc) / (big.numel() / te)
            for tc, te in zip(samples[label], samples["exp"], strict=True)
        ]
        res["ratio:" + label] = statistics.median(per_round)
        res["low:" + label], res["high:" + label] = min(per_round), max(per_round)
    in_cache = max(t_cache["tile_exp"] - t_cache["tile_zero"], 1e-9)
    res["exp_in_cache"] = reps * tile.numel() / in_cache
    for i, stage in enumerate(STAGES):
        res["s:" + stage] = (t[stage] - (t[STAGES[i - 1]] if i else 0.0)) / (n * n)
    return res


def keops_throughput(n: int, dtype: torch.dtype, rounds: int) -> float:
    """Entries/s of a raw pykeops LazyTensor RBF matvec (NaN without pykeops).

    Runs in a fresh process: KeOps' OpenMP worker threads keep spinning after a call and
    would slow every torch operation measured after it in the same process.
    """
    # a plain Process that exits normally: a Pool would terminate its worker while KeOps
    # writes its cache index at interpreter exit, leaving a truncated file behind
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()
    p = ctx.Process(target=_keops_child, args=(n, dtype, rounds, q))
    p.start()
    out = q.get()
    p.join()
    return out


def _keops_child(n: int, dtype: torch.dtype, rounds: int, q: mp.Queue) -> None:
    try:
        from pykeops.torch import LazyTensor
    except Exception as e:  # pragma: no cover - optional peer
        print(f"pykeops unavailable: {e}")
        q.put(float("nan"))
        return
    X, v = _data(n, dtype)
    Z = (X / 0.3).contiguous()
    Kij = (-0.5 * LazyTensor(Z[:, None, :]).sqdist(LazyTensor(Z[None, :, :]))).exp()
    t = interleaved_medians({"keops": lambda: Kij @ v}, rounds)["keops"]
    q.put(n * n / t)


def full_matvec(n: int) -> None:
    """Child process: one full chunked matvec at size ``n`` (float64)."""
    X, v = _data(n, torch.float64)
    k = pn.kernels.RBF(lengthscale=0.3).requires_grad_(False)
    with torch.no_grad():
        pn.kernels.KernelMatrix(k, X, backend="chunked") @ v


def row_slice(n: int, rows: int) -> None:
    """Child process: ``K(X[:rows], X) @ v`` at size ``n`` (float64), never forming rows × n."""
    X, v = _data(n, torch.float64)
    k = pn.kernels.RBF(lengthscale=0.3).requires_grad_(False)
    with torch.no_grad():
        pn.kernels.KernelMatrix(k, X[:rows], X, backend="chunked") @ v


def _timed_peak(fn: functools.partial) -> tuple[float, float]:
    t0 = time.perf_counter()
    base, peak = peak_rss_mb(fn)
    return time.perf_counter() - t0, peak - base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 1 minute)")
    args = parser.parse_args()
    n_tp = 4096 if args.quick else 8192
    n_mem = 30_000 if args.quick else 100_000
    n_big = 200_000 if args.quick else 1_000_000
    rows = 2048

    # memory first: on Linux a spawned child inherits the parent's peak RSS through exec,
    # so the parent must still be small when the children are started
    t_full, mem_full = _timed_peak(functools.partial(full_matvec, n_mem))
    _, mem_rows = _timed_peak(functools.partial(row_slice, n_big, rows))
    t_rows = timeit(functools.partial(row_slice, n_big, rows), repeats=1, warmup=0)
    print_table(
        "Memory (float64, RBF, d=3, chunked; peak RSS above the child's baseline)",
        ["what", "n", "seconds", "peak MB", "dense K would need GB"],
        [
            ["full matvec (child wall time)", n_mem, t_full, mem_full, n_mem**2 * 8 / 1e9],
            [f"{rows}-row slice", n_big, t_rows, mem_rows, rows * n_big * 8 / 1e9],
            [
                "full matvec, extrapolated",
                n_big,
                t_rows * n_big / rows,
                mem_rows,
                n_big**2 * 8 / 1e9,
            ],
        ],
    )

    table, stages = [], []
    for dtype in (torch.float64, torch.float32):
        tp = throughputs(n_tp, dtype, rounds=3 if args.quick else 5)
        load = load_average()
        kk = keops_throughput(n_tp, dtype, rounds=3)
        name = str(dtype).replace("torch.", "")
        for label, _, _ in CASES:
            c = tp[label]
            spread = f"{tp['low:' + label]:.2f}-{tp['high:' + label]:.2f}"
            table.append(
                [name, label, n_tp, c / 1e9, tp["exp"] / 1e9, tp["ratio:" + label], spread,
                 ratio(c, tp["exp_in_cache"]), kk / 1e9, ratio(c, kk)]
            )  # fmt: skip
        per_exp = 1e9 / tp["exp"]  # ns per entry of the streaming exp bound
        parts = [1e9 * tp["s:" + stage] for stage in STAGES]
        stages.append([name, *parts, sum(parts), per_exp, ratio(per_exp, sum(parts)), load])
    print_table(
        "RBF matvec throughput (G entries/s); targets: chunked/exp >= 0.5 (float32), "
        ">= 0.65 (float64), chunked/keops >= 1.5 (keops: uniform inputs)",
        ["dtype", "inputs", "n", "chunked", "torch.exp", "chunked/exp", "rounds range",
         "chunked/exp(in-cache)", "keops", "chunked/keops"],
        table,
    )  # fmt: skip
    print_table(
        f"Where the time goes (ns per entry; gauss, l=0.3; {DEFAULT_TILE[0]}x{DEFAULT_TILE[1]} "
        "tiles; each stage = loop up to it minus loop before it, interleaved)",
        ["dtype", *STAGES, "sum", "exp bound", "exp bound/sum", "load"],
        stages,
    )
    print(
        "torch.exp = exp over 2^24 entries into a preallocated output (streaming); "
        "exp(in-cache) = exp_ on a 256x1024 buffer, an upper bound no kernel matvec reaches "
        "(it also needs a distance GEMM and the product with v per entry). overhead = the "
        "tile loop's Python slicing alone; clamp = the exponent floor (kernels/_exp.py) that "
        "keeps exp off its slow path for exponents below log(tiny). The stages run "
        "one-threaded, as each part of the chunked product does; chunked/exp is the median "
        "of per-round ratios (exp timed right before each matvec), with their range."
    )


if __name__ == "__main__":
    main()
