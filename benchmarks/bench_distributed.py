"""Scaling out kernel matvecs with ``backend="distributed"`` (torch.distributed, gloo on CPU).

Every configuration runs in fresh processes started by :func:`pnsolve.testing.ranks.run_ranks`
(gloo over localhost, **one torch thread per process**), RBF-ARD kernel on ``x ~ U[0,
1]^8`` float64, right-hand sides of ``k = 1`` and ``k = 16`` columns; times are medians
of interleaved repeats inside each run (every rank times the same collective-bound
call; rank 0's figures are reported).

- **Overhead at P = 1**: ``backend="distributed"`` in a group of one ÷ ``"chunked"``
  (the collectives and the padding cost).
- **Strong scaling** at fixed ``n`` (20 000; ``--quick``: 6 000): time per product at
  P = 1 and 2 processes, speed-up ``T₁ / T_P`` and efficiency ``T₁ / (P T_P)``; also per
  ``pn.cg`` iteration on ``K + 0.1 I`` (20 iterations).
- **Weak scaling** (rows per process fixed: ``n = P · n₀``, ``n₀`` = 10 000; ``--quick``:
  3 000): the work per process grows like ``n₀ · n``, so the figure is the kernel
  entries (``n² / P`` per product) per second per process relative to P = 1 (1 =
  perfect).
- **Communication** per product: numbers each rank receives (``(P − 1) ⌈n / P⌉ k``), the
  measured time of the ``all_gather`` alone, and its share of the product.
- **Projection to n = 10⁶ on 8 GPUs**: ``T = n² / (8 R) + C``, ``R`` = kernel entries
  per second of one process in a 16-column product (measured here on CPU; on a CUDA
  machine the script measures KeOps too), ``C`` = the ring all_gather moving
  ``7/8 · n k · 8`` bytes at a link bandwidth ``B``. Without a GPU the GPU rates are
  stated assumptions (the table says so); beside them Wang et al. (2019) report
  training an exact GP on over a million points with 8 GPUs in under 2 hours (NeurIPS
  version; 3 days in the first arXiv version).

This machine has 2 cores: P ≤ 2 (more processes would share cores). Usage:
``python benchmarks/bench_distributed.py [--quick]``; about 1.5 minutes (``--quick``: 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import load_average, print_table

import pnsolve as pn
from pnsolve.testing.ranks import run_ranks

F64 = torch.float64
D = 8
KS = (1, 16)


def _data(n: int) -> torch.Tensor:
    return torch.rand(n, D, dtype=F64, generator=torch.Generator().manual_seed(0))


def _kernel() -> pn.kernels.RBF:
    return pn.kernels.RBF(lengthscale=torch.linspace(0.5, 1.5, D, dtype=F64))


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up (allocations, first collective)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _measure(rank: int, world: int, n: int, repeats: int, cg: bool, chunked: bool) -> dict:
    """In each rank: products (and CG iterations, the all_gather alone) at this n."""
    import torch.distributed as dist

    X = _data(n)
    k = _kernel()
    out: dict[str, float] = {}
    with torch.no_grad():
        K = k.linop(X, backend="distributed")
        out["local"] = K.local_backend  # the rank block backend (what auto chose)
        for kk in KS:
            V = torch.randn(n, kk, dtype=F64, generator=torch.Generator().manual_seed(kk))
            out[f"product k={kk}"] = _median_time(lambda V=V: K @ V, repeats)
            if chunked:  # the single-process reference in the same process
                Kc = k.linop(X, backend="chunked")
                out[f"chunked k={kk}"] = _median_time(lambda V=V, Kc=Kc: Kc @ V, repeats)
            rows = -(-n // world)
            buf = torch.zeros(rows, kk, dtype=F64)
            parts = [torch.empty_like(buf) for _ in range(world)]
            out[f"all_gather k={kk}"] = _median_time(lambda b=buf, p=parts: dist.all_gather(p, b),
                                                     repeats)  # fmt: skip
        if cg:
            A = K.add_diagonal(0.1)
            y = torch.sin(4 * X[:, 0])
            t0 = time.perf_counter()
            _, info = pn.cg(A, y, rtol=1e-30, maxiter=20)
            out["cg iteration"] = (time.perf_counter() - t0) / max(1, info.iterations)
    return out


def _run(world: int, n: int, repeats: int, cg: bool = False, chunked: bool = False) -> dict:
    return run_ranks(_measure, world, args=(n, repeats, cg, chunked), timeout=600)[0]


def _gpu_rate() -> float | None:
    """KeOps kernel entries per second in a 16-column product on CUDA (None without a GPU)."""
    if not torch.cuda.is_available():
        return None
    n = 200_000
    X = torch.rand(n, D, dtype=torch.float32, device="cuda")
    K = _kernel().linop(X, backend="keops")
    V = torch.randn(n, KS[-1], dtype=torch.float32, device="cuda")
    K @ V
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(5):
        K @ V
    torch.cuda.synchronize()
    return n * n * 5 / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller n")
    args = parser.parse_args()
    n_strong, n0, repeats = (6_000, 3_000, 3) if args.quick else (20_000, 10_000, 5)
    print(f"load average: {load_average()}; 1 torch thread per process, gloo, float64, d = {D}")

    one = _run(1, n_strong, repeats, cg=True, chunked=True)
    two = _run(2, n_strong, repeats, cg=True)
    rows = [
        [
            "P = 1 distributed ÷ chunked (overhead)",
            *(f"{one[f'product k={kk}'] / one[f'chunked k={kk}']:.3f}" for kk in KS),
            "—",
        ]
    ]
    for label, key in [
        ("time per product, P = 1 (s)", "product"),
        ("time per product, P = 2 (s)", "product"),
    ]:
        src = one if "P = 1" in label else two
        rows.append([label, *(f"{src[f'{key} k={kk}']:.3f}" for kk in KS),
                     f"{src['cg iteration']:.3f}"])  # fmt: skip
    speed = [one[f"product k={kk}"] / two[f"product k={kk}"] for kk in KS]
    speed_cg = one["cg iteration"] / two["cg iteration"]
    rows.append(["speed-up T₁ / T₂", *(f"{s:.2f}" for s in speed), f"{speed_cg:.2f}"])
    rows.append(["efficiency T₁ / (2 T₂)", *(f"{s / 2:.2f}" for s in speed), f"{speed_cg / 2:.2f}"])
    print_table(
        f"Strong scaling, n = {n_strong} (local blocks: {two['local']}); columns: product "
        "with k = 1, k = 16 right-hand sides, and one pn.cg iteration (k = 1)",
        ["", "k = 1", "k = 16", "cg iteration"],
        rows,
    )

    weak = {1: _run(1, n0, repeats), 2: _run(2, 2 * n0, repeats)}
    rows = []
    for P, res in weak.items():
        n = P * n0
        rates = [n * n / P / res[f"product k={kk}"] for kk in KS]  # kernel entries
        base = [n0 * n0 / weak[1][f"product k={kk}"] for kk in KS]
        rows.append([P, n, *(f"{res[f'product k={kk}']:.3f}" for kk in KS),
                     *(f"{r / 1e6:.0f}" for r in rates),
                     *(f"{r / b:.2f}" for r, b in zip(rates, base))])  # fmt: skip
    print_table(
        f"Weak scaling: n₀ = {n0} rows per process (work per process ∝ n₀ · n)",
        ["P", "n", "s/product k=1", "s/product k=16", "M kernel entries/s/proc k=1",
         "M kernel entries/s/proc k=16", "÷ P = 1 (k=1)", "÷ P = 1 (k=16)"],
        rows,
    )  # fmt: skip

    rows = []
    half = -(-n_strong // 2)  # ⌈n / 2⌉ rows per block
    for kk in KS:
        rows.append([kk, half * kk, f"{half * kk * 8 / 1e3:.0f}",
                     f"{two[f'all_gather k={kk}'] * 1e3:.2f}",
                     f"{two[f'all_gather k={kk}'] / two[f'product k={kk}']:.4f}"])  # fmt: skip
    print_table(
        f"Communication per product at n = {n_strong}, P = 2 (gloo, localhost)",
        ["k", "numbers received per rank", "kB received", "all_gather ms", "share of product"],
        rows,
    )

    rate_cpu = n_strong * n_strong / one["chunked k=16"]  # kernel entries/s, 16 columns
    gather_bw = -(-n_strong // 2) * 16 * 8 / two["all_gather k=16"]  # bytes/s, gloo here
    gpu = _gpu_rate()
    n, P, kk = 10**6, 8, 16
    moved = (P - 1) / P * n * kk * 8
    rows = []
    cases = [("CPU process (measured here, f64, 1 thread)", rate_cpu, gather_bw, "measured")]
    if gpu is not None:
        cases.append(
            ("GPU, KeOps f32 (measured here)", gpu, 100e9, "measured rate, NVLink 100 GB/s")
        )
    else:
        for rate in (2e10, 1e11):
            cases.append((f"GPU, KeOps f32 (ASSUMED {rate:.0e} entries/s)", rate, 100e9,
                          "assumed (no GPU available)"))  # fmt: skip
    for label, rate, bw, src in cases:
        comp = n * n / (P * rate)
        comm = moved / bw
        rows.append([label, f"{rate:.2e}", f"{comp:.3g}", f"{comm:.2g}", f"{comp + comm:.3g}",
                     f"{(comp + comm) * 100 / 3600:.3g}", src])  # fmt: skip
    print_table(
        f"Projection: n = 10⁶, P = 8, k = {kk} (a CG step with 15 probes): per product, "
        "and 100 products (one solve); Wang et al. 2019: exact GP on > 10⁶ points trained "
        "in < 2 h on 8 V100s",
        ["per process", "kernel entries/s (k = 16)", "compute s", "all_gather s", "s/product",
         "h per 100 products", "source"],
        rows,
    )  # fmt: skip


if __name__ == "__main__":
    main()
