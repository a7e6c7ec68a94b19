"""LOVE predictive variances and samples: against exact Cholesky and GPyTorch, on real data.

Three tables, all measured in one run, float64, zero prior mean, RBF-ARD kernel.

1. **Speed at n = t = 10⁴** on the ``protein`` UCI set (split 0, standardised),
   restricted to its first three inputs (a real, low-dimensional problem). RBF-ARD
   lengthscales, outputscale and noise are fitted by
   ``pn.gp.fit_exact_hyperparameters`` (60 Adam steps, lr 0.1) on 1 000 of the ``n``
   training rows. The ``n`` training rows and the ``t`` prediction rows are disjoint
   random subsets (generator seed 0) of the split's training part, so that SMAE can use
   the prediction rows' targets. Without the data folder, uniform synthetic data in [0, 1]³ is used
   instead and the table titles say so.

   - **exact**: ``gp = pn.gp.ExactGP(kernel, noise).fit(X, y)`` (timed as "fit"), then
     ``gp.posterior(Xs).var`` end to end (cross-covariance, mean and a triangular solve
     with ``t`` right-hand sides), timed once (it is the slow side), and the variance
     part alone, ``k(x, x) − ‖L⁻¹ k(X, x)‖²`` given the dense cross-covariance.
   - **LOVE** per rank ``k``: precomputation = ``gp.build_love_cache(rank=k, Xs=Xs)``
     (probe ``k(X, Xs) 1 / t``, ``k + 1`` Lanczos steps on ``K̂``), timed once. After it:
     "var only" = ``cache.variance(Kxs, k(x, x))`` with the dense ``Kxs = k(Xs, X)``
     of shape ``(t, n)`` (against the exact variance part), and "predict" =
     ``gp.posterior(Xs, method="love", cache=cache)`` end to end (mean and variances from
     one matrix-free, tiled pass over ``k(Xs, X)``; against the exact
     ``posterior(Xs).var``). Speedup = exact ÷ LOVE.
   - **samples**: ``post.sample(100, generator)``. LOVE draws through a root from a
     second Lanczos of rank ``k`` on the test covariance: the first call builds the root
     (``k`` matrix-free products with ``k(Xs, Xs)``), later calls only draw. Exact
     sampling forms the ``t × t`` covariance and its Cholesky factor on every call, so it
     is run at t = 3 000 only (at t = 10⁴ the covariance alone is 800 MB and
     ``Wᵀ W`` is 2·10¹² flops); LOVE is run at t = 3 000 for every rank and at
     t = 10⁴ for k = 50 (its root costs k passes over t² kernel entries). At t = 3 000
     the covariance errors are shown (relative Frobenius): of LOVE's covariance
     ``C_love = k(Xs, Xs) − P Pᵀ`` (``P = k(Xs, X) R``) against the exact ``C``, of the
     root ``S Sᵀ`` against ``C_love`` next to the best rank-``k`` error (truncated
     eigendecomposition of ``C_love``), and of ``S Sᵀ`` against ``C``.

2. **GPyTorch** ``fast_pred_var`` at equal rank on the same problem: ``ExactGP`` model
   with ``ZeroMean``, ``ScaleKernel(RBFKernel(ard_num_dims=d))`` and
   ``GaussianLikelihood``, all set to the fitted values, float64, eval mode, under
   ``fast_pred_var()`` and ``max_root_decomposition_size(k)``. Its first
   ``model(Xs)`` call builds its caches (its precomputation); the timed call
   ``model(Xs)`` → mean and variance comes after and is interleaved round-robin with
   pnsolve's predict (same work: cross-covariance, mean, variances).

3. **SMAE vs rank across data sets**: up to 2 000 random training rows, the split's
   test rows (up to 2 000), hyperparameters fitted on up to 1 000 of the training rows;
   ``gp.posterior(Xs, method="love", rank=k)`` for k in 10…200.

Errors against the Cholesky variances: SMAE = ``mean |var − var_exact| / Var(y_test)``
(the LOVE paper's definition, ``pn.metrics.smae``; ``y_test`` = the targets of the
prediction rows) and max relative error ``max |var − var_exact| / var_exact``.

Targets: LOVE ≥ 100× faster than the exact variances after
precomputation; ≥ 1× GPyTorch's ``fast_pred_var`` speed (pnsolve ÷ GPyTorch ≤ 1) at
lower error.

Cost model. On an exact (non-SKI) GP, LOVE's per-point cost after precomputation is
``k(X, x)ᵀ R``: ``n k`` multiply-adds, against ``n²/2`` for the exact triangular solve
``L⁻¹ k(X, x)``. The variance-only speedup is therefore about ``n / (2k)`` at equal
flop rates (200× at k = 25, 50× at k = 100 for n = 10⁴); the ≥ 100× target is
reachable only for ``k ≤ n / 200``. End to end the ``n`` kernel evaluations per point
(bound by the throughput of ``exp``) are common to both and bound LOVE's predict step. Only
SKI-style structured kernels make the per-point cost independent of ``n``.

Usage: ``python benchmarks/bench_love.py [--quick] [--threads N]`` (``--quick``: tiny
sizes, a smoke test that runs in well under a minute on an idle machine; ``--threads``:
torch's intra-op threads, e.g. 1 on a machine that other processes keep busy, where
multi-threaded tiled kernel passes stall at every tile's thread barrier).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _gpytorch_peer as gpytorch_peer
from _common import exact_variances, interleaved_medians, load_average, once, print_table, ratio

import pnsolve as pn

DTYPE = torch.float64
RANKS = (25, 50, 100)
SMAE_RANKS = (10, 25, 50, 100, 200)
N_SAMPLES = 100
SAMPLE_RANK_FULL_T = 50
# (label, data set, input columns or None for all)
SMAE_DATA = [
    ("concrete[0:3]", "concrete", [0, 1, 2]),
    ("protein[0:3]", "protein", [0, 1, 2]),
    ("airfoil", "airfoil", None),
    ("concrete", "concrete", None),
    ("protein", "protein", None),
    ("elevators", "elevators", None),
]


@dataclass(frozen=True)
class Sizes:
    n: int  # training points (speed tables)
    t: int  # prediction points (speed tables)
    t_sample: int  # prediction points for exact vs LOVE sampling
    fit_size: int  # rows used to fit hyperparameters
    fit_steps: int
    smae_n: int  # training points (SMAE table)
    smae_t: int  # test points (SMAE table)
    repeats: int


FULL = Sizes(10_000, 10_000, 3_000, 1_000, 60, 2_000, 2_000, 5)
QUICK = Sizes(1_000, 1_000, 300, 200, 10, 300, 200, 2)


def max_rel(var: torch.Tensor, ref: torch.Tensor) -> float:
    """``max |var − ref| / ref``."""
    return float(((var - ref).abs() / ref).max())


def fitted_kernel(X: torch.Tensor, y: torch.Tensor, steps: int) -> tuple[pn.kernels.RBF, float]:
    """RBF-ARD kernel and noise fitted by exact type-II maximum likelihood on ``(X, y)``."""
    kernel = pn.kernels.RBF(lengthscale=torch.ones(X.shape[1], dtype=DTYPE))
    fit = pn.gp.fit_exact_hyperparameters(kernel, X, y, noise=0.1, steps=steps, lr=0.1)
    return kernel, fit.noise


_UCI_CACHE: dict[str, Any] = {}


def load(name: str) -> Any:
    """``pn.datasets.load_uci(name, split=0)``, loaded once per run."""
    if name not in _UCI_CACHE:
        _UCI_CACHE[name] = pn.datasets.load_uci(name, split=0)
    return _UCI_CACHE[name]


def speed_problem(
    sz: Sizes,
) -> tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(description, X, y, Xs, ys)``: protein inputs 0–2, n + t disjoint training rows."""
    g = torch.Generator().manual_seed(0)
    try:
        ds = load("protein")
        Xall, yall = ds.X_train[:, [0, 1, 2]], ds.y_train
        what = "protein inputs 0-2 (d=3), split 0"
    except (FileNotFoundError, ValueError) as exc:
        print(f"note: protein unavailable ({exc}); using uniform synthetic data in [0,1]^3")
        m = sz.n + sz.t
        Xall = torch.rand(m, 3, generator=g, dtype=DTYPE)
        yall = torch.sin(6 * Xall).sum(-1) + 0.1 * torch.randn(m, generator=g, dtype=DTYPE)
        yall = (yall - yall.mean()) / yall.std()
        what = "SYNTHETIC uniform [0,1]^3 (protein unavailable)"
    perm = torch.randperm(Xall.shape[0], generator=g)
    tr, te = perm[: sz.n], perm[sz.n : sz.n + sz.t]
    return what, Xall[tr], yall[tr], Xall[te], yall[te]


def speed_tables(sz: Sizes) -> tuple[pn.gp.ExactGP, torch.Tensor, dict[int, Any], str]:
    """Tables 1 and 2; returns what the sampling table reuses."""
    what, X, y, Xs, ys = speed_problem(sz)
    n, t = X.shape[0], Xs.shape[0]
    t_hyp, (kernel, noise) = once(
        lambda: fitted_kernel(X[: sz.fit_size], y[: sz.fit_size], sz.fit_steps)
    )
    ls = ", ".join(f"{v:.3g}" for v in kernel.lengthscale.tolist())
    setting = (
        f"{what}; RBF-ARD fitted on {min(sz.fit_size, n)} rows in {t_hyp:.1f} s: "
        f"lengthscales ({ls}), outputscale {float(kernel.outputscale):.3g}, noise {noise:.3g}"
    )
    print(f"\nsetting: {setting}")
    print(f"n = {n} training rows, t = {t} other training rows as prediction inputs")

    gp = pn.gp.ExactGP(kernel, noise)
    t_fit, _ = once(lambda: gp.fit(X, y))

    # Exact: end to end (the public call), then the variance part alone.
    t_exact, t_exact_v, var_exact, Kxs, prior_var = exact_variances(gp, kernel, Xs)
    gc.collect()

    exact_row = ["exact (Cholesky)", "-", f"{t_fit:.2f} (fit)", f"{t_exact_v:.2f} s"]
    rows_pn: list[list[object]] = [[*exact_row, f"{t_exact:.2f} s", 1.0, 1.0, "0", "0"]]
    rows_peer: list[list[object]] = []
    peer_note = None
    caches = {}
    for k in RANKS:
        t_pre, cache = once(lambda k=k: gp.build_love_cache(rank=k, Xs=Xs))
        caches[k] = cache

        def love_var_only(cache: Any = cache) -> torch.Tensor:
            return cache.variance(Kxs, prior_var)

        def love_predict(cache: Any = cache) -> Any:
            return gp.posterior(Xs, method="love", cache=cache)

        fns: dict[str, Callable[[], Any]] = {"var": love_var_only, "predict": love_predict}
        g_first = g_var = None
        if peer_note is None:
            try:
                model = gpytorch_peer.exact_model(X, y, kernel, noise)

                def peer_predict(model: Any = model, k: int = k) -> tuple[Any, Any]:
                    return gpytorch_peer.love(model, Xs, k)

                g_first, _ = once(peer_predict)
                fns["gpytorch"] = peer_predict
            except Exception as exc:  # the peer is optional
                peer_note = f"gpytorch peer skipped: {type(exc).__name__}: {exc}"
        times = interleaved_medians(fns, sz.repeats)
        var = love_predict().var
        smae = pn.metrics.smae(var, var_exact, ys)
        mrel = max_rel(var, var_exact)
        rows_pn.append(
            [
                f"LOVE k={cache.rank}",
                cache.rank,
                f"{t_pre:.2f}",
                f"{times['var'] * 1e3:.0f} ms",
                f"{times['predict'] * 1e3:.0f} ms",
                ratio(t_exact_v, times["var"]),
                ratio(t_exact, times["predict"]),
                f"{smae:.1e}",
                f"{mrel:.1e}",
            ]
        )
        if "gpytorch" in fns:
            g_var = fns["gpytorch"]()[1].detach().clone()
            rows_peer.append(
                [
                    k,
                    f"{times['predict'] * 1e3:.0f}",
                    f"{times['gpytorch'] * 1e3:.0f}",
                    f"{ratio(times['predict'], times['gpytorch']):.2f}",
                    f"{t_pre:.2f}",
                    f"{g_first:.2f}",
                    f"{smae:.1e}",
                    f"{pn.metrics.smae(g_var, var_exact, ys):.1e}",
                    f"{mrel:.1e}",
                    f"{max_rel(g_var, var_exact):.1e}",
                ]
            )
            del model, fns
            gc.collect()

    print_table(
        f"LOVE vs exact Cholesky variances, n = t = {n}, {what}, fitted RBF-ARD, float64 "
        "(times after precomputation; speedup = exact ÷ LOVE)",
        [
            "method",
            "k",
            "precompute s",
            "var only",
            "predict",
            "speedup var",
            "speedup predict",
            "SMAE",
            "max rel err",
        ],
        rows_pn,
    )
    if rows_peer:
        print_table(
            f"LOVE: pnsolve vs gpytorch fast_pred_var, equal rank, n = t = {n}, {what} "
            "(predict = cross-cov + mean + var after caches, interleaved medians; "
            "errors vs Cholesky)",
            [
                "k",
                "pn ms",
                "gpytorch ms",
                "pn ÷ gpytorch",
                "pn precompute s",
                "gpytorch 1st call s",
                "pn SMAE",
                "gpytorch SMAE",
                "pn max rel",
                "gpytorch max rel",
            ],
            rows_peer,
        )
    if peer_note:
        print(f"\nnote: {peer_note}")

    return gp, Xs, caches, what


def sampling_table(
    sz: Sizes, gp: pn.gp.ExactGP, Xs: torch.Tensor, caches: dict[int, Any], what: str
) -> None:
    """``post.sample(100)``: exact Cholesky at a smaller t, LOVE at that t and at full t."""
    ts = Xs[: sz.t_sample]
    t_small = ts.shape[0]
    rows: list[list[object]] = []

    def sample_row(label: str, post_fn: Callable[[], Any], k: Any) -> tuple[list, Any]:
        t_post, post = once(post_fn)
        g = torch.Generator().manual_seed(0)
        t1, _ = once(lambda: post.sample(N_SAMPLES, g))
        t2, _ = once(lambda: post.sample(N_SAMPLES, g))
        return [label, post.mean.shape[0], k, t_post, t1, t2, t_post + t1], post

    row, post_exact = sample_row("exact (Cholesky of t×t cov)", lambda: gp.posterior(ts), "-")
    t_exact_total = row[-1]
    rows.append([*row, 1.0, "0", "0", "-", "0"])
    C = post_exact.cov()
    del post_exact

    def rel(A: torch.Tensor, B: torch.Tensor) -> float:  # ‖A − B‖_F / ‖B‖_F
        return float(torch.linalg.matrix_norm(A - B) / torch.linalg.matrix_norm(B))

    for k, cache in caches.items():
        row, post = sample_row(
            "LOVE (2nd Lanczos root)",
            lambda cache=cache: gp.posterior(ts, method="love", cache=cache),
            k,
        )
        S = post.sample_root()
        C_love = post.cov()  # k(Xs, Xs) − P Pᵀ, what the second Lanczos factorises
        lam = torch.linalg.eigvalsh(C_love).flip(0).clamp_min(0.0)  # descending
        best = float(lam[S.shape[1] :].square().sum().sqrt() / lam.square().sum().sqrt())
        SS = S @ S.mT
        rows.append(
            [
                *row,
                ratio(t_exact_total, row[-1]),
                f"{rel(C_love, C):.1e}",
                f"{rel(SS, C_love):.1e}",
                f"{best:.1e}",
                f"{rel(SS, C):.1e}",
            ]
        )
        del post, S, SS, C_love
    del C
    gc.collect()
    k = SAMPLE_RANK_FULL_T  # one rank at full t: each root costs k passes over t² entries
    row, _ = sample_row(
        "LOVE (2nd Lanczos root)",
        lambda: gp.posterior(Xs, method="love", cache=caches[k]),
        k,
    )
    rows.append([*row, "-", "-", "-", "-", "-"])
    rows = [[*r[:3], *(f"{v:.2f}" for v in r[3:7]), *r[7:]] for r in rows]
    print_table(
        f"Posterior samples, post.sample({N_SAMPLES}), n = {gp.X.shape[0]}, {what}: exact "
        f"only at t = {t_small} (every call forms the t×t covariance and its Cholesky); "
        "LOVE's first call builds the root S (k products with k(Xs, Xs)), later calls only "
        "draw. Relative Frobenius errors: cache = C_love vs C_exact (C_love = k(Xs,Xs) − P Pᵀ "
        "from the variance cache), root = S Sᵀ vs C_love, best = truncated eigh of C_love "
        "at the same rank, total = S Sᵀ vs C_exact",
        [
            "method",
            "t",
            "k",
            "posterior s",
            "1st sample s",
            "2nd sample s",
            "posterior + 1st s",
            "exact ÷ this",
            "cache err",
            "root err",
            "best root err",
            "total err",
        ],
        rows,
    )


def smae_table(sz: Sizes) -> None:
    rows: list[list[object]] = []
    notes: list[str] = []
    for label, name, cols in SMAE_DATA:
        try:
            ds = load(name)
        except (FileNotFoundError, ValueError) as exc:
            notes.append(f"{label} skipped: {exc}")
            continue
        Xtr, ytr = ds.X_train, ds.y_train
        Xte, yte = ds.X_test[: sz.smae_t], ds.y_test[: sz.smae_t]
        if cols is not None:
            Xtr, Xte = Xtr[:, cols], Xte[:, cols]
        g = torch.Generator().manual_seed(0)
        idx = torch.randperm(Xtr.shape[0], generator=g)[: sz.smae_n]
        X, y = Xtr[idx], ytr[idx]
        kernel, noise = fitted_kernel(X[: sz.fit_size], y[: sz.fit_size], sz.fit_steps)
        gp = pn.gp.ExactGP(kernel, noise).fit(X, y)
        exact = gp.posterior(Xte).var
        errs: list[object] = []
        first_ok = "> 200"
        for k in SMAE_RANKS:
            try:
                e = pn.metrics.smae(gp.posterior(Xte, method="love", rank=k).var, exact, yte)
            except ValueError as exc:
                notes.append(f"{label} k={k}: {exc}")
                errs.append("error")
                continue
            errs.append(f"{e:.1e}")
            if e <= 1e-4 and first_ok == "> 200":
                first_ok = str(k)
        rows.append([label, X.shape[1], X.shape[0], Xte.shape[0], f"{noise:.3g}", *errs, first_ok])
    print_table(
        "LOVE SMAE vs rank across data sets (split 0, fitted RBF-ARD, float64; "
        "SMAE = mean|var − var_exact| / Var(y_test))",
        ["data", "d", "n", "t", "noise", *(f"k={k}" for k in SMAE_RANKS), "k for SMAE ≤ 1e-4"],
        rows,
    )
    for note in notes:
        print(f"note: {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's)"
    )
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    sz = QUICK if args.quick else FULL
    print(f"torch threads: {torch.get_num_threads()}, {load_average()}")
    t0 = time.perf_counter()
    with torch.no_grad():  # the hyperparameter fit enables autograd itself
        gp, Xs, caches, what = speed_tables(sz)
        gc.collect()  # the dense (t, n) cross-covariance is gone
        sampling_table(sz, gp, Xs, caches, what)
        del gp, caches
        gc.collect()
        smae_table(sz)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s, {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
