"""IterGP cost per iteration against ``pn.cg`` on the same matrix-free kernel system, and a 10⁵ run.

System: ``K̂ = K + σ² I`` with ``K`` a Matérn-3/2 (ℓ = 0.5) Gram matrix of ``n`` uniform
points in [0, 1]³, σ² = 0.1, float64, held as a matrix-free ``KernelMatrix`` with the
``"chunked"`` backend (tiles recomputed on every product; no ``n × n`` object).

1. Per iteration: ``IterGP.fit`` (CG policy, ``MaxIterations(iters)``) against
   ``pn.cg(K̂, y, rtol=0, atol=0, maxiter=iters)`` — both do ``iters`` iterations; the
   runs are interleaved round-robin after a warm-up and the median is taken. Reported:
   ms per iteration, IterGP ÷ ``pn.cg``, and the number of products with ``K̂`` each made
   (the ratio is dominated by that count: one chunked product costs far more than the
   solver's O(n·i) bookkeeping).
2. Scale (skipped with ``--quick``): ``IterGP.fit`` on n = 10⁵ points with a budget of 3
   iterations, in a fresh process: time per iteration and peak resident memory
   (``_common.peak_rss_mb``), next to the size of one ``n × n`` float64 matrix (80 GB)
   that is never formed; the belief holds O(n · iterations) numbers.

Usage: ``python benchmarks/bench_itergp.py [--quick] [--no-scale]``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import interleaved_medians, peak_rss_mb, print_table, ratio

import pnsolve as pn
from pnsolve.kernels.backends.keops import keops_available

NOISE = 0.1


def _problem(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` uniform points in [0, 1]³ and standard-normal targets (explicit generator)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 3, generator=g, dtype=torch.float64)
    y = torch.randn(n, generator=g, dtype=torch.float64)
    return X, y


def _kernel() -> pn.kernels.Matern:
    return pn.kernels.Matern(nu=1.5, lengthscale=0.5, outputscale=1.0)


def _itergp(iters: int, backend: str = "chunked") -> pn.gp.IterGP:
    return pn.gp.IterGP(
        _kernel(), NOISE, pn.policies.CG(), pn.stopping.MaxIterations(iters), backend=backend
    )


def run_size(n: int, iters: int, repeats: int) -> list[list[object]]:
    """Interleaved timings of IterGP and ``pn.cg`` at size ``n``; one table row each."""
    X, y = _problem(n)
    gp = _itergp(iters)
    A = gp.system(X)
    counts: dict[str, int] = {}

    def run_itergp() -> None:
        gp.fit(X, y)
        assert gp.info.iterations == iters
        counts["IterGP (CG policy)"] = gp.info.matvecs

    def run_cg() -> None:
        with torch.no_grad():
            _, info = pn.cg(A, y, rtol=0.0, atol=0.0, maxiter=iters)
        assert info.iterations == iters
        counts["pn.cg"] = info.products

    fns = {"pn.cg": run_cg, "IterGP (CG policy)": run_itergp}
    times = {name: t / iters for name, t in interleaved_medians(fns, repeats).items()}
    return [
        [n, name, iters, counts[name], f"{t * 1e3:.1f}", ratio(t, times["pn.cg"])]
        for name, t in times.items()
    ]


def _fit_at_scale(n: int, iters: int, backend: str) -> None:
    """Module-level (picklable) body of the scale run: fit and print the time per iteration."""
    torch.set_num_threads(torch.get_num_threads())
    X, y = _problem(n)
    gp = _itergp(iters, backend)
    if backend == "keops":  # compile (or load) the formula outside the timed fit
        with torch.no_grad():
            gp.system(X[:100]) @ torch.ones(100, 1, dtype=X.dtype)
    t0 = time.perf_counter()
    gp.fit(X, y)
    dt = time.perf_counter() - t0
    V = gp.belief.V
    print(
        f"[scale] {backend}, n = {n}: {gp.info.iterations} iterations, {gp.info.matvecs} products, "
        f"{dt:.1f} s total, {dt / gp.info.iterations:.1f} s/iteration; belief V {tuple(V.shape)}",
        flush=True,
    )


def run_scale(n: int, iters: int, backend: str = "chunked") -> list[list[object]]:
    """IterGP at size ``n`` in a fresh process; peak memory against one ``n × n`` matrix."""
    t0 = time.perf_counter()
    base, peak = peak_rss_mb(functools.partial(_fit_at_scale, n, iters, backend))
    wall = time.perf_counter() - t0
    nn_gb = n * n * 8 / 1e9
    per_vec_mb = n * 8 / 1e6
    return [
        [
            backend,
            n,
            iters,
            f"{wall:.1f}",
            f"{wall / iters:.1f}",
            f"{peak - base:.0f}",
            f"{peak:.0f}",
            f"{(peak - base) / per_vec_mb:.0f}",
            f"{nn_gb:.0f}",
        ]
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, no scale run")
    parser.add_argument("--no-scale", action="store_true", help="skip the n = 10⁵ run")
    args = parser.parse_args(argv)
    plan = [(1000, 10, 2), (2000, 10, 2)] if args.quick else [(5000, 20, 2), (20000, 20, 1)]
    rows: list[list[object]] = []
    for n, iters, repeats in plan:
        rows += run_size(n, iters, repeats)
    print_table(
        "IterGP vs pn.cg per iteration, chunked Matérn-3/2 KernelMatrix + σ²I, d = 3, float64",
        ["n", "method", "iters", "products", "ms/iter", "÷ pn.cg"],
        rows,
    )
    if not (args.quick or args.no_scale):
        rows = run_scale(100_000, 3)
        if keops_available():  # KeOps is ~10x slower than the chunked tiles on CPU: 1 step
            rows += run_scale(100_000, 1, "keops")
        print_table(
            "IterGP at scale (fresh process each, CG policy; wall includes process start "
            "and data generation)",
            [
                "backend",
                "n",
                "iters",
                "wall [s]",
                "≈ s/iter",
                "peak − base [MB]",
                "peak [MB]",
                "≈ n-vectors",
                "n×n [GB]",
            ],
            rows,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
