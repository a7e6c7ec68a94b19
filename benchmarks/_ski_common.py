"""Shared pieces of ``bench_ski_love.py``: sizes, timing helpers, data and references."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from _common import once, print_table

import pnsolve as pn

DTYPE = torch.float64
RANK = 50
GRID = 100  # grid points per dimension (m = GRID² in 2-d)
SWEEP_LS = (0.2, 0.2)
SWEEP_NOISE = 0.01
SWEEP_BOUNDS = [(0.0, 1.0), (0.0, 1.0)]
CG_RTOL = 1e-8  # IterGP fit tolerance
CG_MAXITER = 2000
REAL_DATA = "protein"
REAL_D = 2  # inputs kept from the ARD ranking
MIN_DISTINCT = 100  # inputs with fewer distinct training values are not candidates


@dataclass(frozen=True)
class Sizes:
    sweep_ns: tuple[int, ...]  # training sizes of table 1
    sweep_t: int  # test points of table 1
    sweep_t_exact: int  # test points with exact SKI variances (SMAE column of table 1)
    sweep_exact_max_n: int  # largest n with that column (the CG reference costs O(n))
    sweep_repeats: int  # interleaved rounds, per-point timing of table 1
    pre_repeats: int  # interleaved rounds, precomputation timing of table 1
    real_n: int  # training rows of the real-data tables
    real_t: int | None  # test rows (None: all of the split's)
    real_t_exact: int  # test rows with exact references
    fit_size: int  # rows for the hyperparameter fits
    fit_steps: int
    repeats: int  # interleaved rounds, real-data timing
    memory_ns: tuple[int, ...]  # table 5
    smae_data: tuple[str, ...]  # table 3c
    smae_n: int
    smae_t: int
    smae_fit_size: int
    smae_fit_steps: int


SWEEP_NS = (1_000, 10_000, 100_000)
SMAE_DATA = ("protein", "elevators", "bike", "keggdirected", "pol")
FULL = Sizes(SWEEP_NS, 10_000, 10, 100_000, 15, 3, 20_000, None, 200, 1_000, 60, 7,
             SWEEP_NS[1:], SMAE_DATA, 2_000, 100, 500, 30)  # fmt: skip
QUICK = Sizes(SWEEP_NS, 10_000, 10, 10_000, 5, 1, 2_000, 1_000, 100, 300, 20, 3,
              SWEEP_NS[-1:], ("elevators",), 1_000, 50, 200, 15)  # fmt: skip
RANKS = (25, 50, 100, 200)  # LOVE ranks of table 3b (rank 50 everywhere else)


def us(seconds: float) -> str:
    """Seconds as microseconds, 3 significant digits."""
    return f"{seconds * 1e6:.3g}"


def met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def exact_ski_var(
    k: pn.kernels.GridInterpolation,
    A: Any,
    X: torch.Tensor,
    Xe: torch.Tensor,
    rtol: float | None = None,
) -> torch.Tensor:
    """Exact SKI variances ``k(x, x) − k(x, X) K̂⁻¹ k(X, x)`` at ``Xe`` by batched CG.

    ``rtol=None``: to rounding level (``100 eps``: the computation of ``post.math_var``
    of a LOVE posterior; raises if CG does not get there). ``rtol`` given: that
    tolerance, a practical exact solve. The cross-covariance ``(n, t)`` is
    ``k.linop(X, Xe) @ I_t`` (``O(n t)`` memory).
    """
    te = Xe.shape[0]
    Kxs = k.linop(X, Xe) @ torch.eye(te, dtype=X.dtype)  # (n, te), O(n te) memory
    tol = 100 * torch.finfo(X.dtype).eps if rtol is None else rtol
    W, info = pn.cg(A, Kxs, rtol=tol, maxiter=10 * X.shape[0])
    if rtol is None and not info.success:
        raise ArithmeticError(f"exact SKI variances: CG stopped with {info.stop_reason.name}")
    return k.diag(Xe) - (Kxs * W).sum(0)


def stopping() -> Any:
    return pn.stopping.AnyOf(
        pn.stopping.ResidualNorm(rtol=CG_RTOL), pn.stopping.MaxIterations(CG_MAXITER)
    )


# --------------------------------------------------------------------- table 1: sweep
def fitted_rbf(X: torch.Tensor, y: torch.Tensor, steps: int) -> tuple[pn.kernels.RBF, float]:
    """RBF-ARD kernel and noise by exact type-II maximum likelihood on ``(X, y)``."""
    kernel = pn.kernels.RBF(lengthscale=torch.ones(X.shape[1], dtype=DTYPE))
    with torch.enable_grad():
        fit = pn.gp.fit_exact_hyperparameters(kernel, X, y, noise=0.1, steps=steps, lr=0.1)
    return kernel, float(fit.noise)


def low_d_problem(
    name: str, n: int, t: int | None, fit_size: int, fit_steps: int
) -> dict[str, Any]:
    """A ``REAL_D``-input projection of a UCI set: ARD column choice, refit, rows, bounds.

    RBF-ARD on ``fit_size`` random training rows with all inputs; the ``REAL_D`` inputs
    with the shortest lengthscales are kept and RBF-ARD is refitted on them (same rows);
    ``n`` random training rows (their first ``fit_size`` are the fit rows) and the first
    ``t`` test rows; grid bounds = range of both plus 1 % per side.
    """
    ds = pn.datasets.load_uci(name, split=0)
    Xtr, ytr = ds.X_train.double(), ds.y_train.double()
    Xte, yte = ds.X_test.double(), ds.y_test.double()
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(Xtr.shape[0], generator=g)
    fit_idx, idx = perm[:fit_size], perm[:n]
    t_ard, (k_all, noise_all) = once(lambda: fitted_rbf(Xtr[fit_idx], ytr[fit_idx], fit_steps))
    ls_all = k_all.lengthscale.detach()
    distinct = [int(Xtr[:, c].unique().numel()) for c in range(Xtr.shape[1])]
    order = [c for c in torch.argsort(ls_all).tolist() if distinct[c] >= MIN_DISTINCT]
    cols = sorted(order[:REAL_D])
    kernel, noise = fitted_rbf(Xtr[fit_idx][:, cols], ytr[fit_idx], fit_steps)
    t = Xte.shape[0] if t is None else min(t, Xte.shape[0])
    X, y = Xtr[idx][:, cols], ytr[idx]
    Xs, ys = Xte[:t, cols], yte[:t]
    both = torch.cat([X, Xs])
    lo, hi = both.amin(0), both.amax(0)
    pad = 0.01 * (hi - lo)
    bounds = [(float(a), float(b)) for a, b in zip(lo - pad, hi + pad, strict=True)]
    return {
        "X": X, "y": y, "Xs": Xs, "ys": ys, "cols": cols, "kernel": kernel,
        "noise": noise, "bounds": bounds, "Xtr": Xtr, "ls_all": ls_all, "order": order,
        "k_all": k_all, "noise_all": noise_all, "t_ard": t_ard, "fit_rows": len(fit_idx),
        "distinct": distinct,
    }  # fmt: skip


def real_problem(sz: Sizes) -> dict[str, Any]:
    """Tables 2-4's problem on ``REAL_DATA``; prints the column choice (table 2a)."""
    p = low_d_problem(REAL_DATA, sz.real_n, sz.real_t, sz.fit_size, sz.fit_steps)
    Xtr, ls_all, order, cols = p["Xtr"], p["ls_all"], p["order"], p["cols"]
    rows = [
        [
            c,
            f"{float(ls_all[c]):.3g}",
            order.index(c) + 1 if c in order else f"- (< {MIN_DISTINCT} values)",
            p["distinct"][c],
            f"[{float(Xtr[:, c].min()):.2f}, {float(Xtr[:, c].max()):.2f}]",
            "kept" if c in cols else "",
        ]
        for c in range(Xtr.shape[1])
    ]
    print_table(
        f"Table 2a. Input choice on {REAL_DATA} (split 0, standardised): RBF-ARD exact GP "
        f"on {p['fit_rows']} random training rows, {sz.fit_steps} Adam steps "
        f"({p['t_ard']:.0f} s; outputscale {float(p['k_all'].outputscale.detach()):.3g}, "
        f"noise {p['noise_all']:.3g}). The {REAL_D} inputs with the shortest lengthscales "
        f"(most relevant) among those with ≥ {MIN_DISTINCT} distinct training values (a grid "
        "on a near-discrete input is pointless) are kept",
        ["column", "lengthscale", "relevance rank", "distinct values", "range (train)", ""],
        rows,
    )
    kernel, X, bounds = p["kernel"], p["X"], p["bounds"]
    ls = ", ".join(f"{v:.3g}" for v in kernel.lengthscale.tolist())
    print(
        f"\nkept columns {cols} (d = {REAL_D}: m = {GRID}^{REAL_D} = {GRID**REAL_D} grid "
        f"points, 4^{REAL_D} = {4**REAL_D} weights per point); refitted on them: "
        f"lengthscales ({ls}), outputscale {float(kernel.outputscale.detach()):.3g}, noise "
        f"{p['noise']:.3g}; n = {X.shape[0]} random training rows, t = {p['Xs'].shape[0]} "
        "test rows; grid interior = range of train ∪ test + 1 % per side: "
        + ", ".join(f"[{a:.3f}, {b:.3f}]" for a, b in bounds)
    )
    return p
