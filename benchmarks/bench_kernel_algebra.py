"""Kernel algebra (``k1 + k2``, ``k1 * k2``, ``c * k``): cost of the fused pass, as ratios.

Prints, measured side by side in one run (one torch thread; KeOps in a child process
with one OpenMP thread):

1. **Per-tile passes** on a default 512 × 1024 tile: each elementwise pass, GEMM and
   ``addmm_`` a ``fill_tile_`` makes, ÷ one ``exp`` pass. With them a *model* of each
   fused product (the sum of its passes) explains the measured ratios below.
2. **Fused sum cost** (d = 8, float64 and float32, 1 and 16 right-hand sides), chunked
   and keops backends: time of ``(k1 ∘ k2).linop(X) @ V`` ÷ time of the single RBF's
   ``RBF.linop(X) @ V``, for RBF + Matérn-3/2, RBF + RationalQuadratic, RBF + Periodic,
   RBF + Linear, Constant * RBF (≈ 1: a constant factor costs nothing per tile) and
   RBF * Periodic. Also ``k2`` alone ÷ RBF, and unfused ÷ fused where unfused is
   ``RBF.linop(X) @ V + k2.linop(X) @ V`` (two passes; for the product RBF * Periodic the
   cost of its two parts' passes, in parentheses: not the same matrix). The target: a sum
   of two kernels costs ≤ 1.3× one kernel's pass (fused).
3. **CG per iteration**: ``pn.cg(K + σ²I, b, maxiter=20, rtol=0)`` with the Mauna-Loa-like
   ``Constant(2)·RBF + RBF·Periodic + RationalQuadratic + White(0.01)`` ÷ the same with a
   single RBF (chunked, d = 1); also the composite with its ``White`` term moved into the
   diagonal (the same matrix), which shows what the ``White`` part costs per tile.
4. **Peak memory** of full fused chunked products (fresh process, peak RSS above the
   child's baseline) against ``n² · itemsize``: no ``n × n`` object is formed.

Timing: the contenders of one setting run round-robin (3 rounds at the smaller ``n``,
after one warm-up round, 2 at the larger), and the best round of each is kept (robust to
load bursts from other processes on a shared machine); ratios only, never absolute
times. KeOps (CPU) compiles each new formula × dtype × right-hand-side width once (about
6 s each, cached in ``KEOPS_CACHE_FOLDER``, default ``.keops_cache`` in the checkout as
in the Makefile); the warm-up round absorbs that and its duration is printed. KeOps at
the larger ``n`` multiplies a row slice ``K(X[:m], X) @ V`` (m = 1250 of 20 000;
``--quick``: 1000 of 5000): the same formula and work per entry; single-threaded KeOps
on a CPU is 3–5× slower than the chunked backend, and a full product would not fit the
time budget.

Usage: ``python benchmarks/bench_kernel_algebra.py [--quick]``; about 10 minutes on the
2-core reference machine with a warm KeOps cache (608 s at a load average of 7;
``--quick``: under 2 minutes; a cold KeOps cache adds up to 20 compilations of ~7 s).
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import load_average, peak_rss_mb, print_table, ratio

import pnsolve as pn
from pnsolve.kernels.backends.tiling import DEFAULT_TILE, tile_shape

D = 8
TARGET = 1.3
#: Second parts of the pairs (the first part is always an RBF).
LEAVES = ("Matern32", "RQ", "Periodic", "Linear")
#: (label, second part, how the two combine); the reference is always one RBF pass.
PAIRS = (
    ("RBF + Matern32", "Matern32", "+"),
    ("RBF + RQ", "RQ", "+"),
    ("RBF + Periodic", "Periodic", "+"),
    ("RBF + Linear", "Linear", "+"),
    ("Constant * RBF", "Constant", "c*"),
    ("RBF * Periodic", "Periodic", "*"),
)


# ---------------------------------------------------------------------- helpers
def _leaf(name: str) -> pn.kernels.Kernel:
    K = pn.kernels
    make: dict[str, Callable[[], pn.kernels.Kernel]] = {
        "RBF": lambda: K.RBF(lengthscale=1.0),
        "Matern32": lambda: K.Matern(nu=1.5, lengthscale=1.0),
        "RQ": lambda: K.RationalQuadratic(lengthscale=1.0, alpha=1.0),
        "Periodic": lambda: K.Periodic(lengthscale=1.0, period=1.0),
        "Linear": lambda: K.Linear(variance=1.0),
        "Constant": lambda: K.Constant(2.0),
    }
    return make[name]().requires_grad_(False)


def _pair(second: str, how: str) -> pn.kernels.Kernel:
    if how == "+":
        return _leaf("RBF") + _leaf(second)
    if how == "c*":
        return _leaf("Constant") * _leaf("RBF")
    return _leaf("RBF") * _leaf(second)


def mauna_loa() -> pn.kernels.Kernel:
    """``Constant(2)·RBF(1) + RBF(1)·Periodic(1, 1) + RationalQuadratic(1, 1) + White(0.01)``."""
    K = pn.kernels
    k = (
        K.Constant(2.0) * K.RBF(1.0)
        + K.RBF(1.0) * K.Periodic(1.0, 1.0)
        + K.RationalQuadratic(1.0, 1.0)
        + K.White(0.01)
    )
    return k.requires_grad_(False)


def mauna_loa_no_white() -> pn.kernels.Kernel:
    """:func:`mauna_loa` without its ``White`` term (add 0.01 to the diagonal instead)."""
    K = pn.kernels
    k = (
        K.Constant(2.0) * K.RBF(1.0)
        + K.RBF(1.0) * K.Periodic(1.0, 1.0)
        + K.RationalQuadratic(1.0, 1.0)
    )
    return k.requires_grad_(False)


def _data(n: int, d: int, k: int, dtype: torch.dtype, seed: int = 0) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=dtype)
    V = torch.randn(n, k, generator=g, dtype=dtype)
    return X, V


def _best_interleaved(
    fns: dict[str, Callable[[], object]], rounds: int, warmup: bool
) -> tuple[dict[str, float], float]:
    """Best-of-``rounds`` wall time of each function, run round-robin; and the warm-up's time."""
    t_warm = 0.0
    if warmup:
        t0 = time.perf_counter()
        for fn in fns.values():
            fn()
        t_warm = time.perf_counter() - t0
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best, t_warm


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# ------------------------------------------------------------ 1. tile passes
def pass_profile(dtype: torch.dtype, reps: int, rounds: int) -> dict[str, float]:
    """Seconds per pass over one default tile of each operation a ``fill_tile_`` makes."""
    tr, tc = DEFAULT_TILE
    g = torch.Generator().manual_seed(0)
    Xr, Xc = (
        torch.rand(tr, D, generator=g, dtype=dtype),
        torch.rand(tc, D, generator=g, dtype=dtype),
    )
    rbf, per, lin = _leaf("RBF"), _leaf("Periodic"), _leaf("Linear")
    with torch.no_grad():
        a_st, b_st = rbf.tile_operands(Xr, True)[0], rbf.tile_operands(Xc, False)[0]
        a_pe, b_pe = per.tile_operands(Xr, True)[0], per.tile_operands(Xc, False)[0]
        a_li, b_li = lin.tile_operands(Xr, True)[0], lin.tile_operands(Xc, False)[0]
        a_bo, b_bo = torch.cat([a_st, a_pe], 1), torch.cat([b_st, b_pe], 1)
    neg = a_st @ b_st.mT  # −r²/2, what an RBF tile holds before its exp
    pos = -2.0 * neg  # r² ≥ 0 (up to rounding)
    pos.clamp_min_(0.0)
    s, w = torch.empty_like(neg), torch.rand(tr, tc, generator=g, dtype=dtype)
    ratio0d = torch.tensor(0.7, dtype=dtype)
    V1, V16 = torch.randn(tc, 1, dtype=dtype), torch.randn(tc, 16, dtype=dtype)
    acc1, acc16 = torch.zeros(tr, 1, dtype=dtype), torch.zeros(tr, 16, dtype=dtype)
    ops: dict[str, Callable[[], object]] = {
        "exp": lambda: torch.exp(neg, out=s),
        f"GEMM {D + 2} features (stationary)": lambda: torch.mm(a_st, b_st.mT, out=s),
        f"GEMM {2 * D + 1} features (periodic)": lambda: torch.mm(a_pe, b_pe.mT, out=s),
        f"GEMM {D} features (linear)": lambda: torch.mm(a_li, b_li.mT, out=s),
        # RBF * Periodic as exp(−r²/2 + Σ(cos Δu − 1)/ℓ²): one GEMM of both operands, one exp
        f"GEMM {3 * D + 3} features (RBF, periodic in one)": lambda: torch.mm(a_bo, b_bo.mT, out=s),
        "addmm_ with V, k=1": lambda: acc1.addmm_(s, V1),
        "addmm_ with V, k=16": lambda: acc16.addmm_(s, V16),
        "clamp_min": lambda: torch.clamp_min(neg, 0.0, out=s),
        "sqrt": lambda: torch.sqrt(pos, out=s),
        "log1p": lambda: torch.log1p(pos, out=s),
        "neg": lambda: torch.neg(pos, out=s),
        "mul/add a scalar": lambda: torch.mul(pos, 0.5, out=s),
        "mul a 0-d tensor": lambda: torch.mul(pos, ratio0d, out=s),
        "mul a tile (product)": lambda: torch.mul(pos, w, out=s),
        "addcmul_(w, 0-d) (sum)": lambda: s.addcmul_(w, ratio0d),
        "add_(w, alpha=float)": lambda: s.add_(w, alpha=0.7),
        "fill_ / zero_": lambda: s.zero_(),
    }

    def repeated(fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(reps):
                fn()

        return run

    with torch.no_grad():
        best, _ = _best_interleaved({k: repeated(f) for k, f in ops.items()}, rounds, True)
    return {k: v / reps for k, v in best.items()}


def fill_model(p: dict[str, float]) -> dict[str, float]:
    """Passes of each part's ``fill_tile_`` (seconds per tile) read off the pnsolve code."""
    gemm, scal = p[f"GEMM {D + 2} features (stationary)"], p["mul/add a scalar"]
    return {
        "RBF": gemm + p["exp"],  # GEMM, exp_ (no clamp: tile_factor < 0)
        # GEMM, clamp_min_, sqrt_, neg(out=work), exp_, add_(1), mul_(work)
        "Matern32": gemm
        + p["clamp_min"]
        + p["sqrt"]
        + p["neg"]
        + p["exp"]
        + scal
        + p["mul a tile (product)"],
        # GEMM, clamp_min_, div_(2α), log1p_, mul_(−α), exp_
        "RQ": gemm + p["clamp_min"] + 2 * p["mul a 0-d tensor"] + p["log1p"] + p["exp"],
        "Periodic": p[f"GEMM {2 * D + 1} features (periodic)"] + p["exp"],
        "Linear": p[f"GEMM {D} features (linear)"],
        "Constant": 0.0,  # skipped in a product
        "+": p["addcmul_(w, 0-d) (sum)"],
        "*": p["mul a tile (product)"],
        "c*": 0.0,
    }


def model_ratio(p: dict[str, float], second: str, how: str, k: int) -> float:
    """Modelled fused ÷ RBF time: the passes per tile of each, plus the ``addmm_``."""
    f = fill_model(p)
    mm = p[f"addmm_ with V, k={k}"]
    if how == "*" and second == "Periodic":  # exp kernels: one GEMM of both operands, one exp
        fused = p[f"GEMM {3 * D + 3} features (RBF, periodic in one)"] + p["exp"]
        return ratio(fused + mm, f["RBF"] + mm)
    return ratio(f["RBF"] + f[second] + f[how] + mm, f["RBF"] + mm)


# ------------------------------------------------------------ 2. fused sums
def _add(f1: Callable[[], Any], f2: Callable[[], Any]) -> Any:
    """``f1() + f2()``: the unfused sum of two products."""
    return f1() + f2()


def _product(
    kern: pn.kernels.Kernel, *, X1: Any, X2: Any, V: Any, backend: str
) -> Callable[[], object]:
    """``lambda: kern.linop(X1, X2, backend=backend) @ V`` (the operator built once)."""
    Kop = kern.linop(X1, X2, backend=backend)
    return lambda: Kop @ V


def fused_rows(
    backend: str,
    sizes: tuple[int, ...],
    rounds: tuple[int, ...],
    slice_rows: dict[int, int],
    profiles: dict[torch.dtype, dict[str, float]] | None,
) -> tuple[list[list[Any]], float]:
    """Rows of the fused-cost table for one backend; and the total warm-up time.

    ``rounds[i]`` timed rounds at ``sizes[i]`` (a warm-up round at the first size only);
    ``slice_rows[n]``: multiply the row slice ``K(X[:m], X)`` instead of ``K(X, X)``.
    """
    rows, t_warm = [], 0.0
    for i, n in enumerate(sizes):
        for dtype in (torch.float64, torch.float32):
            for k in (1, 16):
                X, V = _data(n, D, k, dtype)
                m = min(n, slice_rows.get(n, n))
                X1 = X[:m] if m < n else X
                X2 = X if m < n else None

                op = functools.partial(_product, X1=X1, X2=X2, V=V, backend=backend)
                fns = {"RBF": op(_leaf("RBF"))}
                fns.update({name: op(_leaf(name)) for name in LEAVES})
                fns.update({label: op(_pair(sec, how)) for label, sec, how in PAIRS})
                for label, sec, how in PAIRS:
                    if how == "+":  # two passes, then the n × k addition
                        f1, f2 = fns["RBF"], fns[sec]
                        fns[label + " unfused"] = functools.partial(_add, f1, f2)
                with torch.no_grad():
                    t, w = _best_interleaved(fns, rounds[i], warmup=i == 0)
                t_warm += w
                for label, sec, how in PAIRS:
                    fused = ratio(t[label], t["RBF"])
                    if how == "+":
                        unfused = f"{ratio(t[label + ' unfused'], t[label]):.3g}"
                    elif how == "*":  # not the same matrix: the cost of the two passes
                        unfused = f"({ratio(t['RBF'] + t[sec], t[label]):.3g})"
                    else:
                        unfused = "-"
                    alone = ratio(t[sec], t["RBF"]) if sec in t else "-"
                    row = [n if m == n else f"{n} ({m} rows)", _dt(dtype), k, label, alone]
                    row.append(fused)
                    if profiles is not None:
                        row.append(model_ratio(profiles[dtype], sec, how, k))
                    row += [unfused, "yes" if fused <= TARGET else "NO"]
                    rows.append(row)
                print(f"  {backend} n={n} {_dt(dtype)} k={k} done ({load_average()})", flush=True)
    return rows, t_warm


def _keops_child(
    sizes: tuple[int, ...], rounds: tuple[int, ...], slice_rows: dict[int, int], q: mp.Queue
) -> None:
    torch.set_num_threads(1)
    try:
        from pnsolve.kernels.backends.keops import import_lazy_tensor

        import_lazy_tensor()
    except Exception as e:  # pragma: no cover - optional peer
        print(f"pykeops unavailable: {e}")
        q.put(([], 0.0))
        return
    q.put(fused_rows("keops", sizes, rounds, slice_rows, None))


def keops_rows(
    sizes: tuple[int, ...], rounds: tuple[int, ...], slice_rows: dict[int, int]
) -> tuple[list[list[Any]], float]:
    """:func:`fused_rows` for KeOps in a fresh process with one OpenMP thread.

    KeOps' OpenMP threads keep spinning after a call and would slow every torch
    operation measured after it in the same process (see bench_kernel_matrix.py).
    """
    saved = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        ctx = mp.get_context("spawn")
        q: mp.Queue = ctx.Queue()
        p = ctx.Process(target=_keops_child, args=(sizes, rounds, slice_rows, q))
        p.start()
        out = q.get()
        p.join()
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved
    return out


# ------------------------------------------------------------------- 3. CG
def cg_rows(n: int, rounds: int, noise: float = 0.1) -> list[list[Any]]:
    """Seconds per CG iteration of composite kernels ÷ a single RBF (chunked, d = 1)."""
    g = torch.Generator().manual_seed(0)
    X = 10.0 * torch.rand(n, 1, generator=g, dtype=torch.float64)
    b = torch.randn(n, generator=g, dtype=torch.float64)
    systems = {
        "RBF": _leaf("RBF").linop(X, backend="chunked").add_diagonal(noise),
        "Mauna-Loa composite": mauna_loa().linop(X, backend="chunked").add_diagonal(noise),
        "composite, White in the diagonal": mauna_loa_no_white()
        .linop(X, backend="chunked")
        .add_diagonal(noise + 0.01),
    }
    info: dict[str, Any] = {}
    sol: dict[str, torch.Tensor] = {}

    def solve(name: str) -> Callable[[], None]:
        def run() -> None:
            sol[name], info[name] = pn.cg(systems[name], b, maxiter=20, rtol=0.0)

        return run

    t, _ = _best_interleaved({name: solve(name) for name in systems}, rounds, warmup=True)
    with torch.no_grad():  # the same matrix: products agree to rounding
        y1 = systems["Mauna-Loa composite"] @ b
        y2 = systems["composite, White in the diagonal"] @ b
    same = bool(torch.linalg.vector_norm(y1 - y2) <= 1e-12 * torch.linalg.vector_norm(y1))
    per_it = {name: t[name] / info[name].iterations for name in systems}
    rows = []
    for name in systems:
        rows.append(
            [
                name,
                info[name].iterations,
                info[name].products,
                ratio(per_it[name], per_it["RBF"]),
                ratio(per_it[name], per_it["Mauna-Loa composite"]),
            ]
        )
    if not same:
        print("WARNING: the composite with and without its White part gave different products")
    return rows


# --------------------------------------------------------------- 4. memory
def _memory_kernel(kind: str) -> tuple[pn.kernels.Kernel, int]:
    if kind == "RBF":
        return _leaf("RBF"), D
    if kind == "RBF + Matern32":
        return _pair("Matern32", "+"), D
    return mauna_loa(), 1


def memory_child(kind: str, n: int) -> None:
    """Child process: one full fused chunked product ``K @ v`` (float64, one thread)."""
    torch.set_num_threads(1)
    kern, d = _memory_kernel(kind)
    X, V = _data(n, d, 1, torch.float64)
    with torch.no_grad():
        kern.linop(X, backend="chunked") @ V


def memory_rows(sizes: tuple[int, ...]) -> list[list[Any]]:
    rows = []
    for kind in ("RBF", "RBF + Matern32", "Mauna-Loa composite"):
        kern, d = _memory_kernel(kind)
        for n in sizes:
            t0 = time.perf_counter()
            base, peak = peak_rss_mb(functools.partial(memory_child, kind, n))
            wall = time.perf_counter() - t0
            nbuf = 1 + kern.tile_buffers
            tr, tc = tile_shape(n, n, 8, num_buffers=nbuf)
            work_mb = nbuf * tr * tc * 8 / 2**20
            dense_mb = n * n * 8 / 2**20
            rows.append(
                [
                    kind,
                    d,
                    n,
                    nbuf,
                    work_mb,
                    peak - base,
                    dense_mb / 1024,
                    (peak - base) / dense_mb,
                    wall,
                ]
            )
    return rows


# ------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 2 minutes)")
    args = parser.parse_args()
    os.environ.setdefault(
        "KEOPS_CACHE_FOLDER", str(Path(__file__).resolve().parents[1] / ".keops_cache")
    )
    torch.set_num_threads(1)
    sizes = (2_000, 5_000) if args.quick else (5_000, 20_000)
    # KeOps multiplies a row slice at the largest size (same formula and work per entry)
    keops_slice = {5_000: 1_000} if args.quick else {20_000: 1_250}
    n_cg = 2_000 if args.quick else 5_000
    t_start = time.perf_counter()
    print(f"bench_kernel_algebra: torch {torch.__version__}, one thread; {load_average()}")

    # memory first: a spawned child inherits the parent's peak RSS, so the parent must
    # still be small when the children start (see bench_kernel_matrix.py)
    mem = memory_rows(sizes)
    print_table(
        "Peak memory of one full fused chunked product K @ v (float64; peak RSS above the "
        "child's baseline)",
        ["kernel", "d", "n", "tile buffers", "tile MB", "peak MB", "dense K GB", "peak/dense", "s"],
        mem,
    )

    profiles = {dt: pass_profile(dt, reps=10, rounds=5) for dt in (torch.float64, torch.float32)}
    names = list(profiles[torch.float64])
    print_table(
        f"Passes over one {DEFAULT_TILE[0]}x{DEFAULT_TILE[1]} tile, time / one exp pass "
        "(best of 5 interleaved rounds)",
        ["pass", "float64", "float32"],
        [
            [nm, ratio(profiles[torch.float64][nm], profiles[torch.float64]["exp"]),
             ratio(profiles[torch.float32][nm], profiles[torch.float32]["exp"])]
            for nm in names
        ],
    )  # fmt: skip

    header = ["n", "dtype", "k", "kernel", "k2 alone/RBF", "fused/RBF"]
    tail = ["unfused/fused", f"fused<={TARGET}"]
    rounds = (2, 2) if args.quick else (3, 2)
    rounds_s, sizes_s = "/".join(map(str, rounds)), "/".join(map(str, sizes))
    chunked, _ = fused_rows("chunked", sizes, rounds, {}, profiles)
    print_table(
        f"Fused cost, chunked backend (default tiles), d={D}: time / one RBF pass "
        f"(best of {rounds_s} interleaved rounds at n = {sizes_s}; {load_average()})",
        [*header, "model", *tail],
        chunked,
    )
    print(
        "model = the sum of the tile passes above that each fill_tile_ makes, plus addmm_.\n"
        "unfused = RBF.linop(X) @ V + k2.linop(X) @ V; for RBF * Periodic (in parentheses) "
        "the two parts' passes, not the same matrix."
    )

    t0 = time.perf_counter()
    keops, t_warm = keops_rows(sizes, rounds, keops_slice)
    t_keops = time.perf_counter() - t0
    if keops:
        print_table(
            f"Fused cost, keops backend (CPU, one OpenMP thread), d={D}: time / one RBF pass "
            f"(best of {rounds_s} interleaved rounds at n = {sizes_s}; {load_average()})",
            [*header, *tail],
            keops,
        )
        print(
            f"keops child: {t_keops:.0f} s in all, of which {t_warm:.0f} s warm-up round "
            "(formula compilations when the cache is cold)."
        )

    cg = cg_rows(n_cg, rounds=rounds[0])
    print_table(
        f"CG, maxiter=20, rtol=0, chunked, d=1, n={n_cg}, float64: seconds per iteration "
        f"(best of {rounds[0]} interleaved rounds; {load_average()})",
        ["kernel", "iterations", "products", "per it / RBF", "per it / composite"],
        cg,
    )
    print(
        "Mauna-Loa composite = Constant(2)*RBF(1) + RBF(1)*Periodic(1,1) + "
        "RationalQuadratic(1,1) + White(0.01); noise 0.1 on the diagonal.\n"
        "'White in the diagonal' is the same matrix with the White part's 0.01 added to "
        "the noise instead (products agree to rounding; CG on this ill-conditioned system "
        "amplifies rounding, so the iterates differ slightly)."
    )
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s; {load_average()}")


if __name__ == "__main__":
    main()
