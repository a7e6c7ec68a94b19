"""Section 6 of ``bench_gpu.py``: LOVE and SKI-LOVE per test point against GPyTorch."""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from typing import Any

import _gpytorch_peer as gpytorch_peer
import torch
from _gpu_common import DTYPES, F32, F64, NOISE, RANK, Ctx, free_backend, name_of, rbf

import pnsolve as pn


def target(X: torch.Tensor, g: torch.Generator, noise: float) -> torch.Tensor:
    f = torch.sin(6 * X[:, 0]) * torch.cos(4 * X[:, 1]) + (X[:, 2:] ** 2).sum(-1)
    return f + noise**0.5 * torch.randn(X.shape[0], generator=g, dtype=X.dtype)


def exact_ski_var(k, A, X: torch.Tensor, Xe: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """Exact SKI variances at ``Xe`` by batched CG with ``K̂`` to 1e-10 (on ``X``'s device)."""
    Kxs = k.linop(X, Xe) @ torch.eye(Xe.shape[0], dtype=X.dtype, device=X.device)
    W, info = pn.cg(A, Kxs, rtol=1e-10, maxiter=5_000)
    return k.diag(Xe) - (Kxs * W).sum(0), info


def love_row(ctx, rows, notes, label, dtype, fit, Xs, ys, ref=None, build_peer=None):
    """µs per point of ours and the GPyTorch peer (interleaved), SMAE of both vs ``ref``."""
    gp, cache, t_fit, t_pre = fit

    def ours() -> tuple[torch.Tensor, torch.Tensor]:
        post = gp.posterior(Xs, method="love", cache=cache)
        return post.mean, post.var

    fns, first = {"ours": ours}, {"ours": ctx.timed(ours)[0]}
    if build_peer is not None:
        try:
            model = build_peer()
            fns["gpytorch"] = lambda: gpytorch_peer.love(model, Xs, RANK)
            first["gpytorch"] = ctx.timed(fns["gpytorch"])[0]  # builds its caches
        except Exception as exc:  # the peer is optional
            fns.pop("gpytorch", None)
            notes.append(f"{label} {name_of(dtype)}: gpytorch peer failed: "
                         f"{type(exc).__name__}: {exc}")  # fmt: skip
    times = ctx.medians(fns)
    t = Xs.shape[0]
    per = {k: 1e6 * v / t for k, v in times.items()}
    smae = {k: None for k in ("ours", "gpytorch")}
    if ref is not None:
        for k, fn in fns.items():
            smae[k] = pn.metrics.smae(fn()[1][: ref.shape[0]].double().cpu(), ref, ys.double())
    notes.append(f"{label} {name_of(dtype)} first calls (s): "
                 + ", ".join(f"{k} {v:.2f}" for k, v in first.items()))  # fmt: skip
    g = per.get("gpytorch")
    rows.append([label, gp.X.shape[0], name_of(dtype), t, RANK, t_fit, t_pre, per["ours"],
                 g, g and per["ours"] / g, smae["ours"], smae["gpytorch"]])  # fmt: skip


def fitted(ctx: Ctx, make: Callable[[], Any], X, y, Xs=None) -> tuple[Any, Any, float, float]:
    """``(model, LOVE cache, fit s, cache s)`` of ``make().fit(X, y)``."""
    t_fit, gp = ctx.timed(lambda: make().fit(X, y))
    t_pre, cache = ctx.timed(lambda: gp.build_love_cache(rank=RANK, Xs=Xs))
    return gp, cache, t_fit, t_pre


def love_exact(ctx: Ctx, rows: list, notes: list) -> None:
    """Exact RBF kernel: ExactGP + LOVE cache vs GPyTorch, float64 Cholesky reference."""
    n, t, dev = ctx.size("dense"), ctx.size("love_t"), ctx.device
    g = torch.Generator().manual_seed(3)
    Xall = torch.rand(n + t, 3, generator=g, dtype=F64)
    yall = target(Xall, g, NOISE)
    X64, y64, Xs64 = Xall[:n].to(dev), yall[:n].to(dev), Xall[n:].to(dev)
    ref = pn.gp.ExactGP(rbf(dev), NOISE).fit(X64, y64).posterior(Xs64).var.double().cpu()
    for dtype in DTYPES:
        if not ctx.afford(15 if ctx.cuda else 3, f"exact RBF n = {n} {name_of(dtype)}", notes):
            continue  # on CUDA its predictions compile a KeOps formula (t × n > 32 MiB)
        X, y, Xs = X64.to(dtype), y64.to(dtype), Xs64.to(dtype)
        fit = fitted(ctx, lambda: pn.gp.ExactGP(rbf(dev), NOISE), X, y, Xs)
        peer = lambda X=X, y=y: gpytorch_peer.exact_model(X, y, rbf(dev), NOISE).to(dev)  # noqa: E731
        love_row(ctx, rows, notes, "exact RBF (ExactGP)", dtype, fit, Xs, yall[n:], ref, peer)
        del fit


def love_ski(ctx: Ctx, rows: list, notes: list) -> None:
    """SKI 100 × 100 on 2-d data: IterGP + LOVE vs GPyTorch's SKI model."""
    n, t, te, dev = ctx.size("free"), ctx.size("ski_t"), 20, ctx.device
    g = torch.Generator().manual_seed(4)
    Xall = torch.rand(n + t, 2, generator=g, dtype=F64)
    yall = torch.sin(6 * Xall[:, 0]) * torch.cos(4 * Xall[:, 1])
    yall += 0.1 * torch.randn(n + t, generator=g, dtype=F64)
    noise, bounds = 0.01, [(0.0, 1.0), (0.0, 1.0)]
    base = pn.kernels.RBF(lengthscale=torch.tensor([0.2, 0.2], dtype=F64), outputscale=1.0)
    ref = None
    for dtype in (F64, F32):  # float64 first: its exact SKI variances are both references
        if not ctx.afford(8 if ctx.cuda else 3, f"SKI {name_of(dtype)}", notes):
            continue
        X, y, Xs = Xall[:n].to(dev, dtype), yall[:n].to(dev, dtype), Xall[n:].to(dev, dtype)
        k = pn.kernels.GridInterpolation(base, grid_size=100, grid_bounds=bounds)
        stop = pn.stopping.ResidualNorm(rtol=1e-8 if dtype == F64 else 1e-4)
        stop = stop | pn.stopping.MaxIterations(2000)
        fit = fitted(ctx, lambda k=k, s=stop: pn.gp.IterGP(k, noise, pn.policies.CG(), s), X, y)
        gp, cache = fit[:2]
        if ref is None:
            t_ref, (var, info) = ctx.timed(lambda gp=gp, X=X, Xe=Xs[:te]: exact_ski_var(
                gp.kernel, gp.A, X, Xe))  # fmt: skip
            ref = var.double().cpu()
            notes.append(
                f"SKI reference: float64 exact SKI variances at {te} test points, "
                f"CG {info.iterations} it. ({info.stop_reason.name}), {t_ref:.1f} s"
            )
        peer = lambda X=X, y=y, gr=cache.grid.grid: gpytorch_peer.ski_model(  # noqa: E731
            X, y, base, noise, gr, bounds)[0].to(dev)  # fmt: skip
        love_row(ctx, rows, notes, "SKI 100×100, d = 2", dtype, fit, Xs, yall[n:], ref, peer)
        del fit


def love_free(ctx: Ctx, rows: list, notes: list) -> None:
    """Exact RBF kernel at the matrix-free size: ours only, time per point."""
    backend, n, t = free_backend(ctx), ctx.size("free"), ctx.size("love_t")
    if ctx.quick:
        return notes.append(f"exact RBF at n = {n}: not in a quick run")
    g = torch.Generator().manual_seed(5)
    Xall = torch.rand(n + t, 3, generator=g, dtype=F64)
    yall = target(Xall, g, NOISE)
    for dtype in DTYPES:
        rate = ctx.rates.get((backend, dtype))  # 10 + 51 products, 4 predictions of (k + 1)
        need = 70 * n * n / rate + (10 if ctx.cuda else 2) if rate else math.inf
        if not ctx.afford(need, f"exact RBF n = {n} {name_of(dtype)}", notes):
            continue
        X, y, Xs = (a.to(ctx.device, dtype) for a in (Xall[:n], yall[:n], Xall[n:]))
        make = lambda: pn.gp.IterGP(rbf(ctx.device), NOISE, pn.policies.CG(),  # noqa: E731
                                    pn.stopping.MaxIterations(10), backend=backend)  # fmt: skip
        fit = fitted(ctx, make, X, y, Xs)
        label = f"exact RBF (IterGP {backend}, 10 it.)"
        love_row(ctx, rows, notes, label, dtype, fit, Xs, yall[n:])
        del fit
    notes.append(
        "exact RBF, matrix-free rows: no SMAE, no GPyTorch peer (at the CUDA size "
        "n = 10⁵ the Cholesky reference and its dense kernel need a 10⁵ × 10⁵ matrix)"
    )


def sec_love(ctx: Ctx) -> None:
    rows: list[list[Any]] = []
    notes: list[str] = []
    with torch.no_grad():
        for name, fn in (("ski", love_ski), ("exact", love_exact), ("free", love_free)):
            ctx.part(name, lambda fn=fn: fn(ctx, rows, notes))
            gc.collect()
    ctx.table(
        f"LOVE rank {RANK}: µs per test point after the cache (mean + variances), ours vs "
        "GPyTorch fast_pred_var at equal rank (interleaved medians); SMAE = mean|var − ref| / "
        "Var(y_test) against float64 references",
        ["model", "n", "dtype", "t", "rank", "fit s", "cache s", "ours µs/pt", "gpytorch µs/pt",
         "ours ÷ gpytorch", "ours SMAE", "gpytorch SMAE"],
        rows, notes,
    )  # fmt: skip


# ------------------------------------------------------------------------------ runner
# run order: the expensive LOVE section (KeOps compilations) last, where only it can lose time
