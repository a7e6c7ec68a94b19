"""SKI/KISS-GP with LOVE: constant time per test point, against exact variances and GPyTorch.

Pleiss et al. (2018), "Constant-time predictive distributions for Gaussian
processes". Everything float64, zero prior mean, RBF-ARD base kernel, LOVE
rank k = 50 unless a table varies it, one thread by default (``--threads``). Speeds are
medians of interleaved (round-robin) calls in one run, so the ratios are side by side;
single-shot times (fits, precomputations, the slow exact references) say "1 run".

**Table 5 (printed first). Peak memory** (``peak_rss_mb``: a fresh process per run,
started before this process grows, because a spawned child's baseline includes its
parent's resident set) of the table-1 fit, and of fit + ``build_love_cache``, at
n = 10⁴ and 10⁵ (``--quick``: 10⁵), next to the sizes of the cache's largest objects
and of an n × n matrix (none is formed).

**Table 1. Time per test point vs n** (synthetic 2-d: ``x ~ U[0, 1]²``,
``y = sin 6x₁ · cos 4x₂ + 0.1 ε``; RBF lengthscales (0.2, 0.2), outputscale 1, noise
0.01, fixed) at n = 10³, 10⁴, 10⁵ with one grid (100 × 100 on [0, 1]², m = 10⁴), rank
50 and the same t = 10⁴ test points. Fit = ``pn.gp.IterGP(GridInterpolation, CG,
ResidualNorm(1e-8) or 2000 iterations)``; precomputation = ``gp.build_love_cache(
rank=50)`` (Lanczos on ``W K_UU Wᵀ + σ²I``, projected to the grid, ``m × k``),
interleaved median; per point = ``gp.posterior(Xs, method="love", cache=cache)``
(interpolation weights of the test points, mean and variances) ÷ t. Table 1b: the
irreducible parts with the test points' weights ``W_s`` (t × m, 16 per row) prebuilt:
``W_s @ v`` (one grid vector: the "ours ÷ bare" denominator), ``W_s @ G`` (the m × 50
grid root), and building ``W_s``. SMAE column: LOVE against the exact SKI variances
(batched CG with ``K̂`` to rounding level, what ``post.math_var`` computes) at 10 test
points (``--quick``: not at n = 10⁵, where that reference takes about a minute).
Target: per-point time flat within 1.5× from 10³ to 10⁵.

**Tables 2-4. Real data, n = 20 000** (``--quick``: 2 000): ``protein`` (split 0,
standardised). RBF-ARD is fitted (``pn.gp.fit_exact_hyperparameters``, 60 Adam steps)
on 1 000 random training rows with all 9 inputs; among the inputs with at least 100
distinct values, the two with the shortest lengthscales (the most relevant) are kept
(table 2a prints the ranking) and RBF-ARD is refitted on them. n random training rows;
prediction points = the split's test rows (all 4 573; ``--quick``: 1 000); grid
100 × 100 whose interior is the range of both plus 1 % per side.

- Table 2, speed after precomputation, against single runs on 200 test rows
  (``--quick``: 100): exact SKI variances by batched CG with ``K̂ = gp.A`` to rounding
  level and to ``rtol`` 1e-6 (cross-covariance included), and exact-GP (RBF, no SKI)
  Cholesky variances given the factor: ``ExactGP.posterior(Xs).var`` end to end, and
  the triangular solve alone given ``k(Xs, X)``. Target: ≥ 1000× faster than exact.
- Table 3, errors on those rows: SMAE ``mean |var − var_ref| / Var(y_test)``
  (``pn.metrics.smae``) and max relative error; LOVE vs exact SKI (target ≤ 1e-3 at
  rank 50) next to exact SKI vs exact GP (SKI's own error). Table 3b: ranks 25…200
  (accuracy, precomputation, per-point time in the same interleaved run).
- Table 4, the GPyTorch peer: ``ExactGP`` with ``ZeroMean``,
  ``ScaleKernel(GridInterpolationKernel(RBFKernel(ard_num_dims=2), grid_size=100,
  num_dims=2, grid_bounds=...))``, ``GaussianLikelihood``, float64, eval mode, under
  ``fast_pred_var()`` and ``max_root_decomposition_size(50)``; its first ``model(Xs)``
  builds its caches (1 run), later calls are interleaved with ours (mean and variances
  both). Its errors vs our exact SKI, and vs its own variances without
  ``fast_pred_var`` (20 rows, ``eval_cg_tolerance`` 1e-6: its exact path costs seconds
  per point). Target: ours at least as fast (ours ÷ gpytorch ≤ 1), lower error.

  Its grid and kernel are made equal to ours (max ``|K_gpytorch − K_ours|`` on 300
  training rows is printed: rounding level) with the three GPyTorch 1.15.2 adjustments
  documented in ``_gpytorch_peer.py``.

**Table 3c. SMAE vs rank on other low-d real projections**: the same column choice
(fit on 500 rows, 30 Adam steps; ``--quick``: 200, 15) on protein, elevators, bike,
keggdirected and pol (``--quick``: elevators), n = 2 000 (``--quick``: 1 000) training
rows, 100 (50) test rows, ranks 25…200, and exact SKI vs exact GP.

Usage: ``python benchmarks/bench_ski_love.py [--quick] [--threads N]``. Full: about
8 minutes on a loaded 2-core machine (the n = 20 000 exact-GP Cholesky, single thread,
about 85 s and 6.4 GB, and the CG references are most of it); ``--quick``: about
1 minute.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import interleaved_medians, load_average, peak_rss_mb, print_table, ratio
from _ski_common import (
    DTYPE,
    FULL,
    GRID,
    QUICK,
    RANK,
    RANKS,
    SWEEP_BOUNDS,
    SWEEP_LS,
    SWEEP_NOISE,
    Sizes,
    exact_ski_var,
    met,
    once,
    stopping,
    us,
)
from _ski_real import real_tables, smae_across_data

import pnsolve as pn


def sweep_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` synthetic 2-d inputs in [0, 1]² and noisy targets (generator ``seed``)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=DTYPE)
    f = torch.sin(6 * X[:, 0]) * torch.cos(4 * X[:, 1])
    return X, f + SWEEP_NOISE**0.5 * torch.randn(n, generator=g, dtype=DTYPE)


def sweep_kernel() -> pn.kernels.GridInterpolation:
    base = pn.kernels.RBF(lengthscale=torch.tensor(SWEEP_LS, dtype=DTYPE), outputscale=1.0)
    return pn.kernels.GridInterpolation(base, grid_size=GRID, grid_bounds=SWEEP_BOUNDS)


def sweep_fit(n: int) -> pn.gp.IterGP:
    X, y = sweep_data(n, seed=n)
    return pn.gp.IterGP(sweep_kernel(), SWEEP_NOISE, pn.policies.CG(), stopping()).fit(X, y)


def _memory_child(n: int, cache: bool, threads: int) -> None:
    """Fit the table-1 model at ``n`` (and build its LOVE cache): run in a fresh process."""
    torch.set_num_threads(threads)
    with torch.no_grad():
        gp = sweep_fit(n)
        if cache:
            gp.build_love_cache(rank=RANK)


def sweep_table(sz: Sizes) -> dict[str, Any]:
    """Table 1; returns the figures for the summary."""
    Xs, ys = sweep_data(sz.sweep_t, seed=12345)
    t = Xs.shape[0]
    gps, fit_s, caches = {}, {}, {}
    for n in sz.sweep_ns:
        fit_s[n], gps[n] = once(lambda n=n: sweep_fit(n))
        caches[n] = gps[n].build_love_cache(rank=RANK)
    pre = interleaved_medians(
        {n: (lambda n=n: gps[n].build_love_cache(rank=RANK)) for n in sz.sweep_ns},
        sz.pre_repeats,
    )
    grid = caches[sz.sweep_ns[0]].grid
    Ws = grid.grid.interpolation(Xs, "Xs")
    v = grid.mean.unsqueeze(-1).contiguous()
    G = grid.root
    fns: dict[Any, Callable[[], Any]] = {
        n: (lambda n=n: gps[n].posterior(Xs, method="love", cache=caches[n])) for n in sz.sweep_ns
    }
    fns["bare"] = lambda: Ws @ v
    fns["bare G"] = lambda: Ws @ G
    fns["weights"] = lambda: grid.grid.interpolation(Xs, "Xs")
    times = interleaved_medians(fns, sz.sweep_repeats)
    per = {k: v / t for k, v in times.items()}

    Xe = Xs[: sz.sweep_t_exact]
    rows: list[list[object]] = []
    ref = per[sz.sweep_ns[0]]
    for n in sz.sweep_ns:
        post = gps[n].posterior(Xe, method="love", cache=caches[n])
        if n <= sz.sweep_exact_max_n:
            t_ex, exact = once(lambda n=n: exact_ski_var(gps[n].kernel, gps[n].A, gps[n].X, Xe))
            smae = f"{pn.metrics.smae(post.var, exact, ys):.1e}"
            ex_pt, ex_ratio = us(t_ex / Xe.shape[0]), f"{ratio(t_ex / Xe.shape[0], per[n]):.2g}"
        else:
            smae = ex_pt = ex_ratio = "- (full run only)"
        rows.append(
            [
                n,
                gps[n].info.iterations,
                f"{fit_s[n]:.2f}",
                f"{pre[n]:.3f}",
                caches[n].rank,
                us(per[n]),
                f"{ratio(per[n], ref):.2f}",
                f"{ratio(per[n], per['bare']):.0f}",
                f"{ratio(per[n], per['bare G']):.1f}",
                ex_pt,
                ex_ratio,
                smae,
            ]
        )
    m = grid.grid.size
    print_table(
        f"Table 1. LOVE-SKI time per test point after precomputation vs n: synthetic 2-d, "
        f"grid {GRID}×{GRID} (m = {m}), rank {RANK}, t = {t} test points, float64, "
        f"{torch.get_num_threads()} thread(s); per point = posterior(Xs, method='love', "
        "cache) ÷ t (weights + mean + var), interleaved medians; bare = W_s @ v with W_s "
        "prebuilt; exact SKI = batched CG with K̂ to rounding level (exact_ski_var) on "
        f"{Xe.shape[0]} test points, single run; SMAE = mean|var − exact| / Var(y_test) "
        f"over the {t} noisy test targets",
        [
            "n",
            "CG iters (fit)",
            "fit s (1 run)",
            "precompute s",
            "k",
            "per point µs",
            "÷ n=1e3",
            "ours ÷ bare W_s@v",
            "ours ÷ W_s@G",
            "exact SKI µs/pt",
            "exact ÷ ours",
            "SMAE vs exact SKI",
        ],
        rows,
    )
    print_table(
        "Table 1b. The irreducible parts (same interleaved run, per test point)",
        ["operation", "per point µs"],
        [
            ["bare W_s @ v (one grid vector, 16 weights per row)", us(per["bare"])],
            [f"W_s @ G (G = grid root, {m} × {G.shape[1]})", us(per["bare G"])],
            ["building W_s (Keys weights of the test points)", us(per["weights"])],
        ],
    )
    flat = max(per[n] for n in sz.sweep_ns) / min(per[n] for n in sz.sweep_ns)
    lo, hi = sz.sweep_ns[0], sz.sweep_ns[-1]
    print(
        f"\nflatness: max/min per-point time over n = {lo}…{hi}: {flat:.2f} "
        f"(target ≤ 1.5: {met(flat <= 1.5)}); precompute grows {pre[hi] / pre[lo]:.0f}× "
        f"for {hi // lo}× more data"
    )
    return {"flat": flat, "n_max": hi, "bare": per[hi] / per["bare"]}


def memory_table(sz: Sizes) -> None:
    """Table 5: peak RSS of the fit and of fit + LOVE precomputation (table-1 model)."""
    threads = torch.get_num_threads()
    m, k = GRID**2, RANK
    mb = 8 / 2**20
    rows: list[list[object]] = []
    for n in sz.memory_ns:
        base_f, peak_f = peak_rss_mb(functools.partial(_memory_child, n, False, threads))
        base_c, peak_c = peak_rss_mb(functools.partial(_memory_child, n, True, threads))
        rows.append(
            [
                n,
                f"{base_f:.0f}",
                f"{peak_f - base_f:.0f}",
                f"{peak_c - base_c:.0f}",
                f"{peak_c - peak_f:.0f}",
                f"{2 * n * k * mb:.0f}",
                f"{n * n * mb:.3g}",
            ]
        )
    print_table(
        "Table 5. Peak resident memory of the table-1 model (fresh process per run, "
        "peak_rss_mb; MB): fit = IterGP CG fit, +cache = fit then build_love_cache(rank=50)",
        [
            "n",
            "baseline MB",
            "fit: peak − base",
            "fit + cache: peak − base",
            "cache beyond fit",
            "Q + R (n × k each)",
            "an n × n f64 matrix",
        ],
        rows,
    )
    print(
        f"grid root K_UU W_Xᵀ R: m × k = {m} × {k}, {m * k * mb:.1f} MB. No n × n (nor t × n, "
        "n × m dense) object is formed by the fit or the precomputation: K̂ = W K_UU Wᵀ + "
        "σ²I is applied through sparse interpolation (16 weights per row) and FFTs; the "
        "memory grows like n (the CG belief's n × iterations blocks, Q, R)."
    )


# ------------------------------------------------------------- tables 2-4: real data
def summary(sweep: dict[str, Any], real: dict[str, Any]) -> None:
    rows = [
        [
            f"per-point time flat within 1.5× over n = 1e3…{sweep['n_max']:.0e}",
            f"max/min {sweep['flat']:.2f}",
            met(sweep["flat"] <= 1.5),
        ],
    ]
    at = f"n = {real['n']}" + ("" if real["n"] == FULL.real_n else "; stated for 20 000")
    for name, s in real["speedups"].items():
        rows.append([f"≥ 1000× faster than {name} ({at})", f"{s:.3g}×", met(s >= 1000)])
    ok_rank = real["first_ok"]
    rows.append(
        [
            f"SMAE LOVE vs exact SKI ≤ 1e-3 at rank {RANK} ({at})",
            f"{real['smae_love']:.1e} (SKI vs exact GP: {real['smae_ski']:.1e}); "
            + (f"≤ 1e-3 from k = {ok_rank}" if ok_rank else f"> 1e-3 up to k = {max(RANKS)}"),
            met(real["smae_love"] <= 1e-3),
        ]
    )
    if "peer" in real:
        r, e_pn, e_g = real["peer"]
        rows.append(["ours at least as fast as gpytorch", f"pn ÷ gpytorch {r:.2f}", met(r <= 1)])
        rows.append(
            [
                "ours lower error than gpytorch (same rank)",
                f"{e_pn:.1e} vs {e_g:.1e} (pn ÷ gpytorch {ratio(e_pn, e_g):.2f})",
                met(e_pn <= e_g),
            ]
        )
    print_table("Targets", ["target", "measured", ""], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sz = QUICK if args.quick else FULL
    print(f"torch threads: {torch.get_num_threads()}, {load_average()}")
    t0 = time.perf_counter()
    with torch.no_grad():  # the hyperparameter fits enable autograd themselves
        memory_table(sz)  # first: a spawned child's baseline includes this process's RSS
        sweep = sweep_table(sz)
        real = real_tables(sz)
        smae_across_data(sz)
    summary(sweep, real)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s, {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
