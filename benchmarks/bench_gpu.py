"""GPU numbers of pnsolve in one command: CG, kernel products, IterGP, QSGP, SGLD, LOVE.

Run by ``make gpu-check`` on a machine with one CUDA GPU; here as a dry run on the CPU with
every size scaled down (the output says so). Ratios are measured side by side in one
process: interleaved (round-robin) medians of ≥ 3 repeats after a warm-up round, every call
wrapped in ``torch.cuda.synchronize()`` on CUDA (:func:`timed`). Sizes are the CUDA ones;
float32 and float64 unless a row or note says otherwise. Sections, in run order:

1. ``cg``: ``pn.cg(A, b, rtol=0, atol=0, maxiter=iters)`` per iteration ÷ a bare matvec and
   ÷ linear_operator's ``linear_cg`` (``tolerance=0``: exactly ``iters`` iterations) on a
   dense stored RBF Gram matrix + 0.1·I (n = 20 000, bare = ``K @ b``) and matrix-free with
   ``k.linop(X, backend="keops")`` (n = 10⁵; the peer gets the same operator as a closure,
   bare = that operator's product); final true relative residuals. Then
   ``precision="mixed"`` ÷ float64 CG to rtol 1e-10 on a dense K̂ with κ about 1e3.
2. ``kernel``: RBF matvec throughput (entries n²/s) of the ``keops``, ``chunked`` and
   ``dense`` backends at n = 20 000 (dense: the product with the cached matrix, its build
   apart) ÷ ``torch.exp`` streaming over 2²⁶ entries (memory-bound on a GPU: KeOps, which
   keeps its entries in registers, may exceed it); one full product at n = 10⁶ (keops, else
   chunked) with its time and peak memory.
3. ``itergp``: ``IterGP(k, noise, CG(), MaxIterations(m), backend)`` at n = 10⁶, matrix-free:
   seconds per iteration ÷ one product with ``K̂``, peak memory.
4. ``qsgp``: QSGP (chevron rank 20, ñ = 100, m̃ = 500, n̄ = 100) seconds per training step at
   m = 10⁵ features and n = 10⁶ points, ÷ one ``ñ × m̃`` feature-block product.
5. ``sgld``: Filippone & Engler (2015) §5.2, SGLD with ULISSE gradients (α = √n, β = 1,
   ε 5e-2 → 5e-6, ``M`` from the MAP of 1 000 points, dense ``K̂`` on the device) on 20 000
   protein rows, 5 chains × 10 iterations, float64: seconds per iteration, the time per
   independent sample projected at the paper's ESS of 0.1 % of the iterations beside its
   2.4 h (2011 GPU), exact Metropolis–Hastings per iteration (a 20 000² Cholesky) on the
   same device, and the PSRF the few draws reach (the < 1.1 target needs thousands of
   iterations: not run).
6. ``love``: LOVE (rank 50) µs per test point after the cache vs GPyTorch's
   ``fast_pred_var`` at equal rank, and SMAE of both against float64 references: SKI
   (d = 2, 100 × 100 grid) at n = 10⁵ (reference: exact SKI variances by CG on 20 points),
   exact RBF at n = 20 000 (Cholesky reference), and ours alone on the exact RBF at n = 10⁵
   (matrix-free; the reference and GPyTorch's dense peer would need a 10⁵ × 10⁵ matrix).

Budget: ``--budget-s`` (default 200, ``--quick`` 55; ``make gpu-check`` passes 155 / 40),
counted from the start of the run. A section whose estimate exceeds the time left is
skipped ("skipped: time budget"); optional parts (float64 at the largest matrix-free sizes,
...) run only while the later sections' estimates still fit. A failing part prints
``FAILED: <section>[/<part>]: <error>`` and its traceback, the rest runs, and the exit code
is 1. Output: tables on stdout, and ``bench_gpu.md`` and ``bench_gpu.json`` in ``--out``
(rewritten after every section, so a killed run keeps what it finished).

Usage: ``python benchmarks/bench_gpu.py --device cuda --out DIR [--quick] [--budget-s S]
[--sections cg,kernel,itergp,qsgp,sgld,love] [--threads N]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from _gpu_common import (
    DTYPES,
    ESTIMATES,
    F64,
    NOISE,
    PAPER_ESS,
    PAPER_S_PER_ITER,
    Ctx,
    free_backend,
    jsonable,
    mem_label,
    meta,
    name_of,
    normal,
    probe_keops,
    rbf,
    uniform,
    write,
)
from _gpu_love import sec_love

import pnsolve as pn
from pnsolve.gp.bayes import (
    ChainConfig,
    LogHyperparameters,
    MetropolisHastings,
    log_posterior,
    sample_hyperparameters,
)


# ------------------------------------------------------------------------------- 1. CG
def cg_rows(ctx: Ctx, n: int, what: str, dtype, matvec, A, target_s: float, lo: int, hi: int):
    """``iters`` bare matvecs, ``pn.cg`` and ``linear_cg`` interleaved; one row each."""
    from linear_operator.utils.linear_cg import linear_cg

    b = normal((n,), dtype, ctx.device, seed=1)
    t_first, _ = ctx.timed(lambda: matvec(b))  # first touch (or KeOps compile/load)
    t_mv, _ = ctx.timed(lambda: matvec(b))
    iters = int(min(hi, max(lo, target_s / max(t_mv, 1e-6))))
    out: dict[str, torch.Tensor] = {}
    its, stop = {"linear_cg": iters}, {"linear_cg": "max_iter"}

    def run_pn() -> None:
        out["pn.cg"], info = pn.cg(A, b, rtol=0.0, atol=0.0, maxiter=iters)
        its["pn.cg"], stop["pn.cg"] = info.iterations, info.stop_reason.name

    def run_lcg() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = linear_cg(matvec, b[:, None], tolerance=0.0, max_iter=iters, max_tridiag_iter=0)
        out["linear_cg"] = x.squeeze(-1)

    fns = {"matvec": lambda: [matvec(b) for _ in range(iters)], "pn.cg": run_pn,
           "linear_cg": run_lcg}  # fmt: skip
    times = ctx.medians(fns)
    t_bare = times.pop("matvec") / iters
    pn_per = times["pn.cg"] / its["pn.cg"]
    rows = [[n, what, name_of(dtype), "bare matvec", iters, 1e3 * t_bare, 1.0, *[None] * 3]]
    for name, t in times.items():
        per = t / its[name]
        res = float(torch.linalg.vector_norm(b - matvec(out[name])) / b.norm())
        rows.append([n, what, name_of(dtype), name, its[name], 1e3 * per, per / t_bare,
                     pn_per / per, res, stop[name]])  # fmt: skip
    return rows, t_first


def sec_cg(ctx: Ctx) -> None:
    rows: list[list[Any]] = []
    notes = []

    def dense(dtype: torch.dtype) -> None:
        n = ctx.size("dense")
        X = uniform(n, 3, dtype, ctx.device, seed=0)
        K = rbf(ctx.device)(X)
        K.diagonal().add_(NOISE)
        A = pn.linops.Dense(K, is_symmetric=True)
        target = 0.1 if ctx.quick else 0.3  # seconds per contender and round
        rows.extend(cg_rows(ctx, n, "dense stored K̂", dtype, K.__matmul__, A, target, 20, 200)[0])

    def keops(dtype: torch.dtype) -> None:
        n = ctx.size("free")
        if dtype == F64 and ctx.quick:
            return notes.append(f"keops float64 at n = {n}: not in a quick run")
        if dtype == F64 and not ctx.afford(25 if ctx.cuda else 10, "keops float64", notes):
            return
        A = rbf(ctx.device).linop(uniform(n, 3, dtype, ctx.device, seed=0), backend="keops")
        A = A.add_diagonal(NOISE)
        target = 0.15 if ctx.quick else 0.5
        r, t_first = cg_rows(ctx, n, "keops K̂", dtype, A.__matmul__, A, target, 5, 50)
        rows.extend(r)
        notes.append(f"first keops product, {name_of(dtype)} (compile or load): {t_first:.1f} s")

    with torch.no_grad():
        for dtype in DTYPES:
            ctx.part(f"dense {name_of(dtype)}", lambda dtype=dtype: dense(dtype))
        for dtype in DTYPES if ctx.keops else ():
            ctx.part(f"keops {name_of(dtype)}", lambda dtype=dtype: keops(dtype))
    if not ctx.keops:
        notes.append("matrix-free part skipped: pykeops not importable or not working")
    ctx.table(
        "CG per iteration, RBF (ℓ = 0.5) Gram + 0.1·I of uniform points in [0,1]³, 1 RHS, "
        "equal iterations (rtol = atol = 0; linear_cg tolerance = 0)",
        ["n", "operator", "dtype", "solver", "iters", "ms/iter", "÷ matvec", "pn.cg ÷ this",
         "final relres", "stop"],
        rows, notes,
    )  # fmt: skip
    ctx.part("mixed precision", lambda: mixed_precision_rows(ctx))


def mixed_precision_rows(ctx: Ctx) -> None:
    """``pn.cg(..., precision="mixed")`` ÷ float64 CG to rtol 1e-10 on a dense stored K̂."""
    n = ctx.size("dense")
    X = normal((n, 3), F64, ctx.device, seed=0)
    K = rbf(ctx.device)(X)
    K.diagonal().add_(0.5 * n / 2000)  # κ about 1e3 at every n (bench_mixed_precision.py)
    A = pn.linops.Dense(K, is_symmetric=True, is_psd=True)
    b = normal((n,), F64, ctx.device, seed=1)
    out: dict[str, Any] = {}

    def solve(precision: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[precision] = pn.cg(A, b, rtol=1e-10, maxiter=20 * n, precision=precision)

    with torch.no_grad():
        times = ctx.medians({p: lambda p=p: solve(p) for p in ("full", "mixed")})
        rows = []
        for p, (x, info) in out.items():
            relres = float(torch.linalg.vector_norm(b - K @ x) / b.norm())
            rows.append([n, p, info.iterations, info.true_residual_checks, info.precision,
                         f"{times[p]:.3f}", times["full"] / times[p], f"{relres:.2e}"])  # fmt: skip
    ctx.table(
        "CG to rtol 1e-10: float64 against precision='mixed' (float32 products), dense "
        "stored RBF K̂ (ℓ = 0.5, 3-d Gaussian inputs, κ about 1e3), 1 RHS",
        ["n", "precision", "iters", "float64 checks", "ended", "s", "speed-up", "final relres"],
        rows,
    )


# --------------------------------------------------------------------------- 2. kernel
def exp_rate(ctx: Ctx, dtype: torch.dtype) -> float:
    """Entries/s of ``torch.exp`` streaming over a large buffer into a preallocated output."""
    big = torch.zeros(2**26 if ctx.cuda else 2**22, dtype=dtype, device=ctx.device)
    out = torch.empty_like(big)
    return big.numel() / ctx.medians({"exp": lambda: torch.exp(big, out=out)}, 5)["exp"]


def sec_kernel(ctx: Ctx) -> None:
    n, nb, backend = ctx.size("dense"), ctx.size("big"), free_backend(ctx)
    rows, big_rows, notes = [], [], []

    def throughput(dtype: torch.dtype) -> None:
        X = uniform(n, 3, dtype, ctx.device, seed=0)
        v = normal((n, 1), dtype, ctx.device, seed=1)
        exp = exp_rate(ctx, dtype)
        names = ["keops"] * (ctx.keops and not (ctx.quick and dtype == F64)) + ["chunked", "dense"]
        ops = {b: rbf(ctx.device).linop(X, backend=b) for b in names}
        fns = {b: (lambda op=op: op @ v) for b, op in ops.items()}
        first = {b: ctx.timed(fn)[0] for b, fn in fns.items()}  # dense: builds the matrix
        for b, t in ctx.medians(fns, 5).items():
            ctx.rates[(b, dtype)] = n * n / t
            rows.append([b, name_of(dtype), n, 1e3 * t, n * n / t / 1e9, exp / 1e9,
                         n * n / t / exp, first[b] - t if b == "dense" else None])  # fmt: skip

    def full_product(dtype: torch.dtype) -> None:
        rate = ctx.rates.get((backend, dtype))
        est = nb * nb / rate if rate else math.inf
        if not rate:
            return notes.append(f"full product {name_of(dtype)}: no {backend} rate measured")
        if est > (15.0 if ctx.cuda else 10.0):
            return notes.append(f"full product {name_of(dtype)} skipped: estimated {est:.0f} s")
        if not ctx.afford(est, f"full product {name_of(dtype)}", notes):
            return
        X = uniform(nb, 3, dtype, ctx.device, seed=0)
        v = normal((nb, 1), dtype, ctx.device, seed=1)
        op = rbf(ctx.device).linop(X, backend=backend)
        ctx.peak_reset()
        t, _ = ctx.timed(lambda: op @ v)
        ctx.big_product[dtype] = t
        big_rows.append([backend, name_of(dtype), nb, t, nb * nb / t / 1e9, ctx.peak_mb(),
                         nb * nb * X.element_size() / 1e9])  # fmt: skip

    tile_rows: list[list] = []

    def tiles(dtype: torch.dtype) -> None:  # the chunked default tile, by measurement
        m = ctx.size("free")
        X = uniform(m, 3, dtype, ctx.device, seed=0)
        v = normal((m, 1), dtype, ctx.device, seed=1)
        exp = exp_rate(ctx, dtype)
        shapes = [(512, 1024), (2048, 4096), (4096, 8192), (8192, 8192), None]
        ops = {str(t or "default"): rbf(ctx.device).linop(X, backend="chunked", tile=t)
               for t in shapes}  # fmt: skip
        fns = {name: (lambda op=op: op @ v) for name, op in ops.items()}
        for name, t in ctx.medians(fns, 3).items():
            tile_rows.append([name, name_of(dtype), m, 1e3 * t, m * m / t / 1e9,
                              m * m / t / exp])  # fmt: skip

    with torch.no_grad():
        for dtype in DTYPES:
            ctx.part(f"throughput {name_of(dtype)}", lambda dtype=dtype: throughput(dtype))
        if ctx.cuda:
            for dtype in DTYPES:
                ctx.part(f"tiles {name_of(dtype)}", lambda dtype=dtype: tiles(dtype))
        for dtype in DTYPES:
            ctx.part(f"full product {name_of(dtype)}", lambda dtype=dtype: full_product(dtype))
    ctx.table(
        "RBF matvec throughput (G kernel entries/s = n²/s), d = 3, 1 RHS; exp = torch.exp "
        "over a large buffer into a preallocated output (streaming)",
        ["backend", "dtype", "n", "ms/product", "G entries/s", "exp G/s", "÷ exp bound",
         "dense build s"],
        rows, ["dense: the product with the cached matrix (no exp); build = first call − product"],
    )  # fmt: skip
    if tile_rows:
        ctx.table(
            "Chunked RBF product by tile (rows, cols), d = 3, 1 RHS",
            ["tile", "dtype", "n", "ms/product", "G entries/s", "÷ exp bound"], tile_rows,
        )  # fmt: skip
    ctx.table(
        f"One full kernel product K(X, X) @ v at n = {nb} (matrix-free, one call)",
        ["backend", "dtype", "n", "seconds", "G entries/s", mem_label(ctx), "n×n would need GB"],
        big_rows, notes,
    )  # fmt: skip


# --------------------------------------------------------------------------- 3. IterGP
def sec_itergp(ctx: Ctx) -> None:
    backend, n = free_backend(ctx), ctx.size("big")
    rows, notes = [], []

    def one(dtype: torch.dtype) -> None:
        rate = ctx.rates.get((backend, dtype))
        if rate is None and not (ctx.quick and dtype == F64 and backend == "keops"):  # probe
            Xp = uniform(n // 10, 3, dtype, ctx.device, seed=0)
            op = rbf(ctx.device).linop(Xp, backend=backend)
            v = torch.ones(n // 10, 1, dtype=dtype, device=ctx.device)
            with torch.no_grad():
                rate = (n // 10) ** 2 / min(ctx.timed(lambda: op @ v)[0] for _ in range(2))
        t_prod = ctx.big_product.get(dtype, n * n / rate if rate else math.inf)
        allow = min(20.0 if ctx.cuda else 15.0, ctx.spare())
        m = int(min(5, allow / t_prod - 2))  # m iterations + about 2 products of slack
        if m < 2:
            why = f"one product ≈ {t_prod:.1f} s" if rate else f"no {backend} rate measured"
            notes.append(f"{name_of(dtype)} skipped: {why}, {allow:.0f} s allowed")
            return
        X = uniform(n, 3, dtype, ctx.device, seed=0)
        y = normal((n,), dtype, ctx.device, seed=1)
        gp = pn.gp.IterGP(rbf(ctx.device), NOISE, pn.policies.CG(), pn.stopping.MaxIterations(m),
                          backend=backend)  # fmt: skip
        ctx.peak_reset()
        t_fit, _ = ctx.timed(lambda: gp.fit(X, y))
        peak = ctx.peak_mb()
        if dtype not in ctx.big_product:
            with torch.no_grad():
                t_prod = ctx.timed(lambda: gp.A @ y)[0]
        its = gp.info.iterations
        rows.append([backend, name_of(dtype), n, its, gp.info.matvecs, t_fit, t_fit / its,
                     t_prod, t_fit / its / t_prod, peak])  # fmt: skip

    for dtype in DTYPES:
        ctx.part(name_of(dtype), lambda dtype=dtype: one(dtype))
    ctx.table(
        f"IterGP fit (CG policy, MaxIterations(m)), RBF + 0.1·I, n = {n}, matrix-free",
        ["backend", "dtype", "n", "iterations", "products", "fit s", "s/iteration",
         "one product s", "÷ product", mem_label(ctx)],
        rows, notes,
    )  # fmt: skip


# ----------------------------------------------------------------------------- 4. QSGP
def sec_qsgp(ctx: Ctx) -> None:
    n, m = ctx.size("big"), ctx.size("qsgp_m")
    steps = 30 if ctx.cuda and not ctx.quick else 10
    rows: list[list[Any]] = []

    def one(dtype: torch.dtype) -> None:
        X = normal((n, 8), dtype, ctx.device, seed=0)
        y = torch.sin(X[:, 0]) + 0.1 * normal((n,), dtype, ctx.device, seed=1)

        q = pn.gp.QSGP(
            pn.kernels.RBF(lengthscale=2.0).to(ctx.device), pn.likelihoods.Gaussian(0.1), m,
            covariance="chevron", rank=20, batch_size=100, feature_batch_size=500,
            control_variate_rank=100, generator=torch.Generator().manual_seed(1),
        )  # fmt: skip
        g_fit = torch.Generator().manual_seed(2)  # CPU generators: pnsolve moves the draws
        t_setup, _ = ctx.timed(lambda: q.fit(X, y, steps=5, generator=g_fit, warm_start=0,
                                             freeze_hyperparameters=0))  # fmt: skip
        t_steps, _ = ctx.timed(lambda: q.fit(X, y, steps=q.steps_done + steps, generator=g_fit,
                                             freeze_hyperparameters=0))  # fmt: skip
        hist = statistics.median(h["seconds"] for h in q.history[5:])
        g = torch.Generator().manual_seed(3)
        r = torch.randint(0, n, (100,), generator=g).to(ctx.device)
        c = torch.randint(0, m, (500,), generator=g).to(ctx.device)
        with torch.no_grad():
            blk = ctx.medians({"b": lambda: q.features.block(X[r], c, frozen=True)
                               @ q.mean_weights[c]}, 5)["b"]  # fmt: skip
        per = t_steps / steps
        rows.append([n, m, name_of(dtype), t_setup, 1e3 * per, 1e3 * hist, 1e3 * blk, per / blk])

    for dtype in DTYPES:
        ctx.part(name_of(dtype), lambda dtype=dtype: one(dtype))
    ctx.table(
        f"QSGP training step (chevron rank 20, ñ = 100, m̃ = 500, n̄ = 100, d = 8): {steps} "
        "steps after 5; block = Φ(X[ñ rows], m̃ features) @ μ",
        ["n", "m", "dtype", "set-up + 5 steps s", "ms/step", "ms/step (its history, median)",
         "block ms", "step ÷ block"],
        rows,
    )  # fmt: skip


# ----------------------------------------------------------------------------- 5. SGLD
def sec_sgld(ctx: Ctx) -> None:
    n, T, chains = ctx.size("sgld"), ctx.size("sgld_iters"), 5
    ds = pn.datasets.load_uci("protein", split=0)
    idx = torch.randperm(ds.X_train.shape[0], generator=torch.Generator().manual_seed(0))[:n]
    X, y = ds.X_train[idx].double().to(ctx.device), ds.y_train[idx].double().to(ctx.device)
    kern = pn.kernels.RBF(lengthscale=1.0).to(ctx.device)
    params = LogHyperparameters(kern, 0.1, parametrization="log_tau")
    cfg = ChainConfig(iterations=T, alpha=n**0.5, beta=1.0, step_start=5e-2, step_end=5e-6,
                      subset=min(1000, n), backend="dense", checkpoint_every=T)  # fmt: skip
    ctx.peak_reset()
    wall, out = ctx.timed(lambda: sample_hyperparameters(
        X, y, cfg, chains=chains, generator=torch.Generator().manual_seed(1), params=params,
        processes=1))  # fmt: skip
    peak = ctx.peak_mb()
    done = len(out.seconds)
    sgld = sum(out.seconds) / (done * T)
    mh = MetropolisHastings(lambda th: log_posterior(params, X, y, th)[0], out.laplace.M, adapt=0)
    k = 3 if ctx.cuda else 2
    t_start, state = ctx.timed(lambda: mh.start(out.laplace.theta, k))
    mh_it = ctx.timed(lambda: mh.advance(state, k, torch.Generator().manual_seed(2)))[0] / k
    paper = PAPER_S_PER_ITER / PAPER_ESS / 3600
    ctx.table(
        f"Filippone & Engler (2015) §5.2 on protein (n = {n}, float64, K̂ stored on the device): "
        f"s/iteration, and the time per independent sample projected at the paper's ESS of "
        f"{100 * PAPER_ESS:g} % of the iterations",
        ["sampler", "n", "chains × iters", "wall s", "s/iteration", "products/iteration",
         "÷ SGLD", "projected h/indep. sample", "paper ÷ this", mem_label(ctx)],
        [["SGLD-ULISSE (ours)", n, f"{done} × {T}", wall, sgld,
          sum(out.products) / (done * T), 1.0, sgld / PAPER_ESS / 3600,
          paper / (sgld / PAPER_ESS / 3600), peak],
         ["exact MH (ours)", n, f"1 × {k}", None, mh_it, None, mh_it / sgld, None, None, None],
         ["paper SGLD-ULISSE (GTX 590)", 22_784, "5 chains", None, PAPER_S_PER_ITER, None,
          PAPER_S_PER_ITER / sgld, paper, 1.0, None]],
        [f"SGLD: α = √n, β = 1, ε 5e-2 → 5e-6, M from the MAP of {cfg.subset} points (in wall "
         "only); s/iteration = chain-seconds / iterations, each chain's cold first solve included",
         f"MH: one exact log posterior (kernel, {n}² Cholesky) per step; first {t_start:.2f} s",
         "paper (census, n = 22 784): 10 000 iterations/day = 8.64 s/iteration, ESS ≈ 0.1 % → "
         "2.4 h per independent sample; MH's own ESS is not assumed here",
         f"dropped chains: {out.dropped}" if out.dropped else "no chain diverged"],
    )  # fmt: skip
    if T >= 4 and done >= 2:
        psrf, upper = pn.metrics.gelman_rubin(out.all_samples)
        ctx.table(
            f"How far it got: PSRF of {done} chains × {T} iterations from iteration 0 (target "
            "< 1.1, which the paper reaches after a few thousand iterations: not run here)",
            ["parameter", "PSRF", "97.5 % upper", "chain 0, last draw"],
            [[name, float(psrf[i]), float(upper[i]), float(out.all_samples[0, -1, i])]
             for i, name in enumerate(out.names)],
        )  # fmt: skip


# ----------------------------------------------------------------------------- 6. LOVE
SECTIONS = {"cg": sec_cg, "kernel": sec_kernel, "itergp": sec_itergp, "qsgp": sec_qsgp,
            "sgld": sec_sgld, "love": sec_love}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default, help=f"cuda or cpu (default {default})")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench_gpu"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (≤ 60 s on CUDA)")
    parser.add_argument("--budget-s", type=float, default=None, help="200, quick: 55")
    parser.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated subset")
    parser.add_argument("--threads", type=int, help="torch CPU threads (--device cpu: 1)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu: --device cuda but torch.cuda.is_available() is False", flush=True)
        return 2
    if args.threads is not None or device.type == "cpu":
        torch.set_num_threads(args.threads or 1)  # a shared CPU: no spinning thread barriers
    order = [s for s in args.sections.split(",") if s]
    if any(s not in SECTIONS for s in order):
        parser.error(f"--sections: choose from {list(SECTIONS)}")
    budget = args.budget_s if args.budget_s is not None else (55.0 if args.quick else 200.0)
    ctx = Ctx(device=device, quick=args.quick, budget=budget, order=order)
    probe_keops(ctx)
    print(f"[bench_gpu] {json.dumps(jsonable(meta(ctx)), default=str)}", flush=True)
    for name in order:
        ctx.current = name
        res = ctx.results[name] = {"status": "ok", "seconds": 0.0, "tables": [], "failed": []}
        if ctx.left() < ctx.size(name, ESTIMATES):
            res["status"] = "skipped: time budget"
            print(f"[bench_gpu] section {name} skipped: time budget ({ctx.left():.0f} s left)",
                  flush=True)  # fmt: skip
            continue
        print(f"[bench_gpu] section {name} started ({ctx.left():.0f} s left)", flush=True)
        t0 = time.perf_counter()
        ctx.part("", lambda name=name: SECTIONS[name](ctx))
        res["seconds"] = time.perf_counter() - t0
        res["status"] = "FAILED" if res["failed"] else "ok"
        gc.collect()
        if ctx.cuda:
            torch.cuda.empty_cache()
        print(f"[bench_gpu] section {name} finished in {res['seconds']:.1f} s", flush=True)
        write(ctx, args.out)  # after every section: a run killed later keeps what it has
    failed = [name for name, res in ctx.results.items() if res["failed"]]
    for note in ctx.notes:
        print(f"note: {note}", flush=True)
    print(f"[bench_gpu] done in {time.perf_counter() - ctx.t0:.0f} s; failed sections: "
          f"{failed or 'none'}; output in {args.out}", flush=True)  # fmt: skip
    write(ctx, args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
