"""``bench_ski_love.py``'s real-data tables (2-4, 3c): protein at n = 20 000, GPyTorch peer."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable
from typing import Any

import _gpytorch_peer as gpytorch_peer
import torch
from _common import exact_variances, interleaved_medians, once, print_table, ratio
from _ski_common import (
    GRID,
    RANK,
    RANKS,
    REAL_D,
    REAL_DATA,
    Sizes,
    exact_ski_var,
    low_d_problem,
    real_problem,
    stopping,
    us,
)

import pnsolve as pn

GPYTORCH_EXACT_T = 20  # test rows for gpytorch's own (slow) variances w/o fast_pred_var
GPYTORCH_EXACT_TOL = 1e-6  # its eval_cg_tolerance there (default 0.01)


def smae_across_data(sz: Sizes) -> None:
    """Table 3c: LOVE-SKI SMAE vs rank on the top-2 ARD inputs of several UCI sets."""
    rows: list[list[object]] = []
    notes: list[str] = []
    for name in sz.smae_data:
        try:
            p = low_d_problem(name, sz.smae_n, sz.smae_t, sz.smae_fit_size, sz.smae_fit_steps)
        except (FileNotFoundError, ValueError) as exc:
            notes.append(f"{name} skipped: {exc}")
            continue
        X, y, Xs, ys, base, noise = p["X"], p["y"], p["Xs"], p["ys"], p["kernel"], p["noise"]
        k = pn.kernels.GridInterpolation(base, grid_size=GRID, grid_bounds=p["bounds"])
        gp = pn.gp.IterGP(k, noise, pn.policies.CG(), stopping()).fit(X, y)
        ref = exact_ski_var(gp.kernel, gp.A, X, Xs)
        errs = []
        for r in RANKS:
            var = gp.posterior(Xs, method="love", cache=gp.build_love_cache(rank=r)).var
            errs.append(f"{pn.metrics.smae(var, ref, ys):.1e}")
        var_gp = pn.gp.ExactGP(base, noise).fit(X, y).posterior(Xs).var
        ls = ", ".join(f"{v:.2g}" for v in base.lengthscale.tolist())
        rows.append(
            [
                name,
                str(p["cols"]),
                f"({ls})",
                f"{float(base.outputscale.detach()):.2g}",
                f"{noise:.2g}",
                *errs,
                f"{pn.metrics.smae(ref, var_gp, ys):.1e}",
            ]
        )
    print_table(
        f"Table 3c. LOVE-SKI SMAE vs exact SKI by rank on other low-d real projections: "
        f"the {REAL_D} most relevant ARD inputs of each set (RBF-ARD fitted on "
        f"{sz.smae_fit_size} rows, {sz.smae_fit_steps} Adam steps, then refitted on them), "
        f"n = {sz.smae_n} random training rows, the first {sz.smae_t} test rows, grid "
        f"{GRID}×{GRID}; last column: exact SKI vs exact GP (SKI's own error)",
        ["data", "columns", "lengthscales", "outputscale", "noise",
         *(f"k={r}" for r in RANKS), "SKI vs exact GP"],
        rows,
    )  # fmt: skip
    for note in notes:
        print(f"note: {note}")


def real_tables(sz: Sizes) -> dict[str, Any]:
    """Tables 2-4; returns the figures for the summary."""
    p = real_problem(sz)
    X, y, Xs, ys, base, noise = p["X"], p["y"], p["Xs"], p["ys"], p["kernel"], p["noise"]
    n, t = X.shape[0], Xs.shape[0]
    te = min(sz.real_t_exact, t)
    Xe, ye = Xs[:te], ys[:te]
    k = pn.kernels.GridInterpolation(base, grid_size=GRID, grid_bounds=p["bounds"])
    t_fit, gp = once(lambda: pn.gp.IterGP(k, noise, pn.policies.CG(), stopping()).fit(X, y))
    t_pre, cache = once(lambda: gp.build_love_cache(rank=RANK))
    grid = cache.grid.grid
    rank_caches = {r: once(lambda r=r: gp.build_love_cache(rank=r)) for r in RANKS if r != RANK}
    rank_caches[RANK] = (t_pre, cache)

    # exact SKI on the subset: to rounding level, and at a practical tolerance
    kb = gp.kernel  # the grid-bound kernel of the fit (here k itself: bounds are given)
    t_math, var_ski = once(lambda: exact_ski_var(kb, gp.A, X, Xe))
    t_cg, var_cg = once(lambda: exact_ski_var(kb, gp.A, X, Xe, rtol=1e-6))

    # exact GP (no SKI), Cholesky; its n × n factor is freed after the timings
    def exact_reference() -> tuple[float, float, float, torch.Tensor]:
        exact = pn.gp.ExactGP(base, noise)
        t_chol, _ = once(lambda: exact.fit(X, y))
        t_ex, t_ex_v, var, _, _ = exact_variances(exact, base, Xe)
        return t_chol, t_ex, t_ex_v, var

    t_chol, t_ex, t_ex_v, var_gp = exact_reference()
    gc.collect()

    # gpytorch peer
    peer_note = None
    fns: dict[str, Callable[[], Any]] = {
        "ours": lambda: gp.posterior(Xs, method="love", cache=cache)
    }
    Ws = grid.interpolation(Xs, "Xs")
    v = cache.grid.mean.unsqueeze(-1).contiguous()
    fns["bare"] = lambda: Ws @ v
    for r, (_, c) in rank_caches.items():
        if r != RANK:
            fns[f"k={r}"] = lambda c=c: gp.posterior(Xs, method="love", cache=c)
    g_first = g_kdiff = None
    g_var = g_var_exact = None
    try:
        model, Kg = gpytorch_peer.ski_model(X, y, base, noise, grid, p["bounds"])
        g_kdiff = float((Kg(X[:300]) - k(X[:300])).abs().max())

        def peer() -> tuple[torch.Tensor, torch.Tensor]:
            return gpytorch_peer.love(model, Xs, RANK)

        g_first, _ = once(peer)
        fns["gpytorch"] = peer
    except Exception as exc:  # the peer is optional
        peer_note = f"gpytorch peer skipped: {type(exc).__name__}: {exc}"
    times = interleaved_medians(fns, sz.repeats)
    per = {key: val / t for key, val in times.items()}
    post = gp.posterior(Xs, method="love", cache=cache)
    var_love = post.var[:te]
    t_gex = None
    if "gpytorch" in fns:
        g_mean, g_all = fns["gpytorch"]()
        g_var = g_all[:te]
        mean_diff = float((g_mean - post.mean).abs().max())
        try:
            import gpytorch

            model.prediction_strategy = None  # rebuild its caches without fast_pred_var

            def peer_exact() -> torch.Tensor:
                with (
                    torch.no_grad(),
                    gpytorch.settings.fast_pred_var(False),
                    gpytorch.settings.eval_cg_tolerance(GPYTORCH_EXACT_TOL),
                    gpytorch.settings.max_cg_iterations(2000),
                    warnings.catch_warnings(),
                ):
                    warnings.simplefilter("ignore")
                    return model(Xe[:GPYTORCH_EXACT_T]).variance

            t_gex, g_var_exact = once(peer_exact)
        except Exception as exc:
            peer_note = f"gpytorch exact variances skipped: {type(exc).__name__}: {exc}"

    # Table 2: speed
    love = per["ours"]
    rows = [
        ["LOVE-SKI (ours), after precompute", f"{t_fit:.2f} + {t_pre:.2f}", us(love), 1.0],
        [
            "exact SKI: batched CG to rounding level (100 eps)",
            "-",
            us(t_math / te),
            f"{ratio(t_math / te, love):.3g}",
        ],
        [
            "exact SKI: batched CG, rtol 1e-6",
            "-",
            us(t_cg / te),
            f"{ratio(t_cg / te, love):.3g}",
        ],
        [
            "exact GP: Cholesky, posterior(Xs).var end to end",
            f"{t_chol:.1f} (Cholesky)",
            us(t_ex / te),
            f"{ratio(t_ex / te, love):.3g}",
        ],
        [
            "exact GP: triangular solve only, given k(Xs, X)",
            "-",
            us(t_ex_v / te),
            f"{ratio(t_ex_v / te, love):.3g}",
        ],
    ]
    if "gpytorch" in per:
        rows.append(
            [
                "gpytorch SKI fast_pred_var, after its caches",
                f"{g_first:.2f} (1st call)",
                us(per["gpytorch"]),
                f"{ratio(per['gpytorch'], love):.3g}",
            ]
        )
    print_table(
        f"Table 2. Time per test point at n = {n} ({REAL_DATA} columns {p['cols']}), "
        f"rank {RANK}, float64, {torch.get_num_threads()} thread(s): LOVE-SKI and gpytorch "
        f"over t = {t} test points (interleaved medians), the exact references single runs "
        f"over {te} of them; speedup = that ÷ LOVE-SKI",
        ["method", "fit/precompute s (1 run)", "per point µs", "speedup of LOVE"],
        rows,
    )
    print(f"LOVE-SKI ÷ bare W_s @ v (same run): {ratio(love, per['bare']):.0f}")
    speedups = {
        "exact SKI": ratio(t_math / te, love),
        "exact SKI rtol 1e-6": ratio(t_cg / te, love),
        "exact GP": ratio(t_ex / te, love),
        "exact GP solve only": ratio(t_ex_v / te, love),
    }

    # Table 3: accuracy
    def smae(a: torch.Tensor, b: torch.Tensor, y: torch.Tensor = ye) -> str:
        return f"{pn.metrics.smae(a, b, y):.1e}"

    def max_rel(a: torch.Tensor, b: torch.Tensor) -> str:
        return f"{float(((a - b).abs() / b).max()):.1e}"

    acc = [
        ["LOVE-SKI (ours)", "exact SKI", smae(var_love, var_ski), max_rel(var_love, var_ski)],
        ["exact SKI, CG rtol 1e-6", "exact SKI", smae(var_cg, var_ski), max_rel(var_cg, var_ski)],
        ["exact SKI", "exact GP", smae(var_ski, var_gp), max_rel(var_ski, var_gp)],
        ["LOVE-SKI (ours)", "exact GP", smae(var_love, var_gp), max_rel(var_love, var_gp)],
    ]
    if g_var is not None:
        acc.append(["gpytorch fast_pred_var", "exact SKI (ours)", smae(g_var, var_ski),
                    max_rel(g_var, var_ski)])  # fmt: skip
        if g_var_exact is not None:
            ge = g_var_exact.shape[0]
            tag = f" ({ge} rows, its CG tol {GPYTORCH_EXACT_TOL:g})"
            acc.append(["gpytorch fast_pred_var", "gpytorch w/o fast_pred_var" + tag,
                        smae(g_var[:ge], g_var_exact, ye[:ge]),
                        max_rel(g_var[:ge], g_var_exact)])  # fmt: skip
            acc.append(["gpytorch w/o fast_pred_var" + tag, "exact SKI (ours)",
                        smae(g_var_exact, var_ski[:ge], ye[:ge]),
                        max_rel(g_var_exact, var_ski[:ge])])  # fmt: skip
        acc.append(["gpytorch fast_pred_var", "exact GP", smae(g_var, var_gp),
                    max_rel(g_var, var_gp)])  # fmt: skip
    print_table(
        f"Table 3. Variance errors on {te} test rows, n = {n}, rank {RANK}: SMAE = "
        "mean|var − ref| / Var(y_test) and max |var − ref| / ref. Exact SKI = the same "
        "SKI model solved to rounding level; exact GP = RBF without SKI (Cholesky)",
        ["variances", "reference", "SMAE", "max rel err"],
        acc,
    )
    smae_love = pn.metrics.smae(var_love, var_ski, ye)
    smae_ski = pn.metrics.smae(var_ski, var_gp, ye)

    rank_rows = []
    first_ok = None
    for r in sorted(rank_caches):
        t_r, c = rank_caches[r]
        var_r = gp.posterior(Xe, method="love", cache=c).var
        e = pn.metrics.smae(var_r, var_ski, ye)
        if first_ok is None and e <= 1e-3:
            first_ok = r
        pt = per["ours" if r == RANK else f"k={r}"]
        rank_rows.append(
            [
                c.rank,
                f"{t_r:.2f}",
                us(pt),
                f"{ratio(t_math / te, pt):.3g}",
                f"{ratio(t_ex / te, pt):.3g}",
                f"{e:.1e}",
                max_rel(var_r, var_ski),
                f"{float(((var_r - var_ski) / var_ski).mean()):.1e}",
            ]
        )
    print_table(
        f"Table 3b. LOVE-SKI rank k vs accuracy and speed at n = {n} (same interleaved run "
        f"as table 2; errors on {te} rows vs exact SKI; exact variances here span "
        f"[{float(var_ski.min()):.1e}, {float(var_ski.max()):.1e}], prior variance "
        f"{float(k.diag(Xe).mean()):.2f})",
        [
            "k",
            "precompute s (1 run)",
            "per point µs",
            "speedup vs exact SKI",
            "speedup vs exact GP",
            "SMAE",
            "max rel err",
            "mean rel err",
        ],
        rank_rows,
    )
    print(
        "smallest rank with SMAE ≤ 1e-3: "
        + (f"k = {first_ok}" if first_ok is not None else f"none up to {max(RANKS)}")
    )

    # Table 4: gpytorch
    out: dict[str, Any] = {
        "speedups": speedups, "smae_love": smae_love, "smae_ski": smae_ski, "n": n,
        "first_ok": first_ok,
    }  # fmt: skip
    if g_var is not None:
        smae_g = pn.metrics.smae(g_var, var_ski, ye)
        print_table(
            f"Table 4. pnsolve vs gpytorch SKI + LOVE at n = {n}, equal grid, kernel, noise "
            f"and rank {RANK} (max |K_gpytorch − K_ours| on 300 training rows = "
            f"{g_kdiff:.1e}); per point = mean + variances after the caches, t = {t}, "
            f"interleaved medians; errors on {te} rows vs our exact SKI",
            [
                "pn µs/pt",
                "gpytorch µs/pt",
                "pn ÷ gpytorch",
                "pn precompute s",
                "gpytorch 1st call s",
                "pn SMAE",
                "gpytorch SMAE",
                "gpytorch w/o fast_pred_var s/pt",
            ],
            [
                [
                    us(love),
                    us(per["gpytorch"]),
                    f"{ratio(love, per['gpytorch']):.2f}",
                    f"{t_pre:.2f}",
                    f"{g_first:.2f}",
                    f"{smae_love:.1e}",
                    f"{smae_g:.1e}",
                    "-" if t_gex is None else f"{t_gex / GPYTORCH_EXACT_T:.2g}",
                ]
            ],
        )
        print(
            "pn precompute = build_love_cache (Lanczos + grid projection; the mean's CG "
            f"solve is the fit, {t_fit:.2f} s); gpytorch's 1st call = its mean cache (CG) "
            f"+ variance cache (Lanczos + projection). max |mean_gpytorch − mean_pn| = "
            f"{mean_diff:.1e} (its mean cache uses its default CG tolerance)."
        )
        out["peer"] = (ratio(love, per["gpytorch"]), smae_love, smae_g)
    if peer_note:
        print(f"\nnote: {peer_note}")
    return out
