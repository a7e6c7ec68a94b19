"""Filippone & Engler (2015) §3–4 at CPU scale: CG, PCG and ULISSE against the condition number.

The tables of ``docs/sgld.md`` come from this script.

**Setting.** The paper's GP: ``k(x, x') = σ exp(−τ ‖x − x'‖²) + λ δ`` on the Concrete
training inputs (UCI split 0, ``n = 927``, standardised; ``--quick``: a seeded random
subset of ``QUICK_N`` rows) with the standardised targets ``y``. ``θ = (log σ, log τ,
log λ)`` (``pn.gp.bayes.LogHyperparameters(..., parametrization="log_tau")``) is drawn from
Gamma priors: ``PRIORS`` (see there for why they differ from the paper's Fig. 1 settings).
Everything runs in float64 on dense ``K̂ = K + λ I`` unless said otherwise.

**Fig. 1.** Quantiles of ``log10 κ(K̂)`` over ``--draws`` prior draws (``κ`` from
``eigvalsh``), next to the paper's four ``Gamma(a, b)``-on-every-parameter settings
(fewer draws each). Each unit bin of ``log10 κ`` in ``[BIN_LO, BIN_HI)`` keeps the first
draw that falls in it; Figs. 2–4 use those ``θ`` (one per bin).

**Fig. 2.** ``K̂ s = y`` by :func:`pnsolve.cg` to relative residual ``EPS = 1e-8`` (the
paper's ε): iterations and ``‖s − s*‖/‖s*‖`` against the Cholesky solution ``s*``, for

- *f64*: plain CG;
- *f32 CMVPs*: the paper's "float" variant. ``K̂`` is rounded to float32 and each
  product is computed in float32, while CG's recurrences (vectors, inner products, step
  sizes) stay in float64. We do not run the whole CG in float32: a float32 CG cannot
  even represent a 1e-8 residual (machine epsilon 6e-8), so it would measure the
  recurrences, not the products. ``pn.cg`` confirms convergence on the true residual
  ``y − K̂₃₂ s`` (same float32 product); where that stalls it stops with
  ``STAGNATION``, the attainable accuracy of float32 products;
- *PCG*: ``pn.preconditioners.PivotedCholesky(K̂, rank)`` as ``M`` (``PCG_RANK``).

``time`` columns: wall time per solve divided by float64 CG's (interleaved medians of
``--timing-repeats`` rounds after a warm-up round); ``per iter`` divides each by its
iterations (what a float32 product saves); PCG's ``+build`` includes forming the
preconditioner. All columns share the ``maxiter = 10 n`` default of ``pn.cg``.

**Fig. 3.** :func:`pnsolve.randomized.ulisse` on ``K̂ s = y`` with ``α = q √n`` (the paper's
early threshold, absolute), ``q ∈ Q_VALUES``, ``β ∈ BETAS``. ``--estimates`` estimates
come from one call with ``num_estimates`` (independent roulette draws along one CG run:
the CG path to the threshold is deterministic, so they are distributed as independent
runs). ``iters``: ``l`` + mean roulette steps, the steps one estimate costs, and its
ratio to CG's (Fig. 2). ``avg sd``: the paper's "average standard deviation across the
elements of the solution", ``mean_i sd_i`` over the estimates; ``rms sd``:
``√(mean_i var_i)`` next to the exact ``√(tr Cov/n)`` from
:func:`pnsolve.randomized.ulisse_variance` with CG's error norms (a lower bound: errors
after CG's 1e-8 stop are taken as zero). ``mean err``: ``‖mean − s*‖/‖s*‖``.

**Fig. 4.** ``log10 ‖g − g̃‖²/‖g‖²`` (eq. 13), ``g`` the exact (Cholesky) gradient of
``log p(y | θ)`` in ``θ``, ``g̃`` from ``pn.gp.bayes.LogMarginalGradient`` with one
Rademacher probe (``num_probes=1``), a fresh estimator per repetition (no warm start):

- ``CG``: ``method="cg"`` with threshold ``α = EPS √n``: CG to convergence (relative
  residual 1e-8 for ``y`` and the probe, ``‖r‖ = √n``); its error is the one-probe trace
  estimate's. ``--cg-reps`` repetitions (fewer than ULISSE's): its only randomness is
  the probe, and each repetition costs a full CG solve;
- ``U q``: ``method="ulisse"``, ``α = q √n``, ``β = 1`` (``--reps`` repetitions).

Bins where Fig. 2's CG did not converge within ``10 n`` steps are left out (no converged
CG to compare with, and ULISSE's threshold step count approaches CG's there).

Reported: the mean over repetitions of the log10 error (the paper's statistic) ± its
standard error, ``log10`` of the mean error (the mean squared error, which heavy tails
dominate), and the products with ``K̂`` per gradient (block products, one per step)
with their ratio to CG's.

Randomness: the prior draws (``torch._standard_gamma`` with a ``torch.Generator``, the
sampler behind ``torch.distributions.Gamma``), the ``--quick`` subset, the roulettes and
the probes each come from their own generator seeded from ``--seed``.

Usage: ``python benchmarks/bench_ulisse_seed.py [--quick] [--draws N] [--reps R]
[--cg-reps R] [--estimates E] [--timing-repeats R] [--seed S] [--threads T]``
(``--threads`` default ``THREADS = 1``, see there).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import (
    ResultStore,
    add_resume_arguments,
    interleaved_medians,
    print_table,
    ratio,
    timeit,
)

import pnsolve as pn
from pnsolve.gp.bayes import (
    GammaPrior,
    LogHyperparameters,
    LogMarginalGradient,
    exact_log_marginal,
)

#: The paper's CG convergence threshold ε (relative residual here).
EPS = 1e-8
#: Early thresholds ``α = q √n`` (the paper's Figs. 3–4) and roulette rates ``β`` (Fig. 3).
Q_VALUES = (0.1, 1.0)
BETAS = (1.0, 100.0)
#: ``β`` of the gradient estimates (the paper's Fig. 4).
GRADIENT_BETA = 1.0
#: Priors on ``(σ, τ, λ)``, shape ``a`` and rate ``b``. On *standardised* inputs
#: (median squared distance ≈ 14) the paper's Fig. 1 settings (the same ``Gamma(a, b)`` on
#: every parameter, ``SEED_PRIORS``) give ``κ`` mostly below 1e3.6; these span 1e2–1e8 as
#: the paper's figure does: σ ~ Gamma(1, 1) (mean 1, the targets' variance),
#: τ ~ Gamma(2, 20) (mean 0.1: correlation e^{-1.4} at the median distance), λ ~
#: Gamma(0.25, 2) (mean 0.125, a heavy left tail that reaches λ ≈ 1e-6).
PRIORS = (GammaPrior(1.0, 1.0), GammaPrior(2.0, 20.0), GammaPrior(0.25, 2.0))
#: The paper's Fig. 1 legend: ``(a, b)`` on every parameter.
SEED_PRIORS = ((0.5, 0.01), (1.0, 0.01), (1.0, 0.1), (1.0, 1.0))
#: Unit bins of ``log10 κ`` for Figs. 2–4.
BIN_LO, BIN_HI = 2, 8
#: Quantiles reported for Fig. 1.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: Default torch threads. The products here are small (``n ≤ 927``, 1–2 columns): with two
#: OpenMP threads on a 2-core machine that also runs other jobs, every product waits for
#: the busy core (measured 15–24 ms instead of 1 ms per 927 × 927 product), which swamps
#: both the run time and the ratios. One thread keeps the comparison side by side.
THREADS = 1
#: ``--quick`` subset size, and pivoted-Cholesky ranks (full, quick).
QUICK_N = 300
PCG_RANK = {False: 100, True: 50}


def load_data(quick: bool, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Concrete split-0 training inputs and targets (standardised), float64."""
    ds = pn.datasets.load_uci("concrete", split=0, dtype=torch.float64)
    X, y = ds.X_train, ds.y_train
    if quick:
        idx = torch.randperm(X.shape[0], generator=generator)[:QUICK_N]
        X, y = X[idx], y[idx]
    return X, y


def draw_theta(
    shapes_rates: list[tuple[float, float]], count: int, generator: torch.Generator
) -> torch.Tensor:
    """``count`` draws of ``θ = log φ``, ``φ_i ~ Gamma(a_i, rate b_i)``: shape ``(count, p)``."""
    cols = []
    for a, b in shapes_rates:
        shape = torch.full((count,), a, dtype=torch.float64)
        cols.append(torch.log(torch._standard_gamma(shape, generator=generator) / b))
    return torch.stack(cols, dim=1)


def system(params: LogHyperparameters, X: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Dense ``K̂(θ) = σ exp(−τ‖x − x'‖²) + λ I``, float64."""
    with torch.no_grad():
        K = params.kernel_at(theta)(X).detach()
    return K + params.noise_at(theta) * torch.eye(X.shape[0], dtype=X.dtype)


def log10_kappa(A: torch.Tensor) -> float:
    ev = torch.linalg.eigvalsh(A)
    return math.log10(float(ev[-1]) / float(ev[0]))


def quantile_row(label: str, values: list[float]) -> list[object]:
    t = torch.tensor(values, dtype=torch.float64)
    qs = torch.quantile(t, torch.tensor(QUANTILES, dtype=torch.float64))
    return [label, len(values), *[round(float(v), 2) for v in qs], round(float(t.max()), 2)]


# --------------------------------------------------------------------------- Fig. 1
def fig1(
    params: LogHyperparameters, X: torch.Tensor, draws: int, generator: torch.Generator
) -> dict[int, tuple[torch.Tensor, float]]:
    """Quantiles of ``log10 κ``; the first draw per unit bin (``{bin: (θ, log10 κ)}``)."""
    ours = [(p.shape, p.rate) for p in params.priors]
    thetas = draw_theta(ours, draws, generator)
    kappas = [log10_kappa(system(params, X, th)) for th in thetas]
    chosen: dict[int, tuple[torch.Tensor, float]] = {}
    for th, k in zip(thetas, kappas):
        b = math.floor(k)
        if BIN_LO <= b < BIN_HI and b not in chosen:
            chosen[b] = (th, k)
    names = ", ".join(f"{n[4:]}~Gamma({a:g},{b:g})" for n, (a, b) in zip(params.names, ours))
    rows = [quantile_row(f"ours: {names}", kappas)]
    per_seed = max(2, draws // len(SEED_PRIORS))
    for a, b in SEED_PRIORS:
        th = draw_theta([(a, b)] * 3, per_seed, generator)
        kappas_seed = [log10_kappa(system(params, X, t)) for t in th]
        rows.append(quantile_row(f"paper: all Gamma({a:g},{b:g})", kappas_seed))
    header = ["priors", "draws", *[f"q{int(100 * q)}" for q in QUANTILES], "max"]
    print_table(f"Fig. 1: log10 κ(K̂) under Gamma priors, Concrete n={X.shape[0]}", header, rows)
    bins = range(BIN_LO, BIN_HI)
    counts = [sum(math.floor(k) == b for k in kappas) / draws for b in bins]
    shares = ", ".join(f"[{b},{b + 1}): {c:.2f}" for b, c in zip(bins, counts))
    print(f"fraction of our draws per bin: {shares}")
    missing = [b for b in range(BIN_LO, BIN_HI) if b not in chosen]
    if missing:
        print(f"no draw in bins {missing}: they are left out of Figs. 2-4")
    return dict(sorted(chosen.items()))


# --------------------------------------------------------------------------- Fig. 2
def float32_products(A: torch.Tensor) -> pn.linops.LinearOperator:
    """``K̂`` rounded to float32, products in float32, returned in float64."""
    A32 = A.to(torch.float32)
    n = A.shape[0]
    return pn.linops.Closure(
        lambda V: (A32 @ V.to(torch.float32)).to(torch.float64),
        (n, n), dtype=torch.float64, is_symmetric=True, is_psd=True,
    )  # fmt: skip


def cg_with_errors(
    A: object, y: torch.Tensor, s_star: torch.Tensor, M: object = None
) -> tuple[pn.krylov.CGInfo | str, torch.Tensor]:
    """CG to ``EPS``; the info (or why it failed) and ``‖s* − s_i‖`` along the run."""
    errors = [float(s_star.norm())]
    try:
        _, info = pn.cg(A, y, rtol=EPS, M=M,
                        callback=lambda s: errors.append(float((s_star - s).norm())))  # fmt: skip
    except pn.NotPositiveDefiniteError as e:
        return f"not SPD (iteration {e.iteration})", torch.tensor(errors, dtype=torch.float64)
    return info, torch.tensor(errors, dtype=torch.float64)


def time_solves(
    A: torch.Tensor,
    A32: pn.linops.LinearOperator,
    M: pn.preconditioners.PivotedCholesky,
    y: torch.Tensor,
    rank: int,
    repeats: int,
) -> tuple[dict[str, float], float]:
    """Median seconds per solve of CG f64, f32 products and PCG; seconds per PCG build."""
    times = interleaved_medians(
        {
            "f64": lambda: pn.cg(A, y, rtol=EPS),
            "f32": lambda: pn.cg(A32, y, rtol=EPS),
            "pcg": lambda: pn.cg(A, y, rtol=EPS, M=M),
        },
        repeats,
    )
    build = timeit(
        lambda: pn.preconditioners.PivotedCholesky(pn.linops.as_linop(A), rank), repeats=repeats
    )
    return times, build


def fig2(
    cases: dict[int, tuple[torch.Tensor, float]],
    params: LogHyperparameters,
    X: torch.Tensor,
    y: torch.Tensor,
    rank: int,
    repeats: int,
) -> dict[int, dict[str, object]]:
    """Iterations, errors and time ratios of CG f64, f32 products and PCG, per bin."""
    out: dict[int, dict[str, object]] = {}
    rows = []
    for b, (theta, k) in cases.items():
        A = system(params, X, theta)
        s_star = torch.cholesky_solve(y[:, None], torch.linalg.cholesky(A))[:, 0]
        snorm = float(s_star.norm())
        A32 = float32_products(A)
        M = pn.preconditioners.PivotedCholesky(pn.linops.as_linop(A), rank)
        res = {
            "f64": cg_with_errors(A, y, s_star),
            "f32": cg_with_errors(A32, y, s_star),
            "pcg": cg_with_errors(A, y, s_star, M=M),
        }
        times, build = time_solves(A, A32, M, y, rank, repeats)
        cells = []
        for key in ("f64", "f32", "pcg"):
            info, errors = res[key]
            if isinstance(info, str):
                cells += [info, "—"]
            else:
                mark = "" if bool(info.converged) else f" ({info.stop_reason.name.lower()})"
                cells += [f"{info.iterations}{mark}", float(errors[-1]) / snorm]
        f64_info, f32_info = res["f64"][0], res["f32"][0]
        per_iter = (
            ratio(times["f32"] / f32_info.iterations, times["f64"] / f64_info.iterations)
            if not isinstance(f32_info, str) and not isinstance(f64_info, str)
            else "—"
        )
        out[b] = {
            "theta": theta, "log10k": k, "A": A, "s_star": s_star, "errors": res["f64"][1],
            "cg_iters": getattr(f64_info, "iterations", None),
            "cg_converged": not isinstance(f64_info, str) and bool(f64_info.converged),
        }  # fmt: skip
        rows.append(
            [
                f"[{b},{b + 1})", round(k, 2), *cells,
                ratio(times["f32"], times["f64"]),
                per_iter,
                ratio(times["pcg"], times["f64"]),
                ratio(times["pcg"] + build, times["f64"]),
            ]
        )  # fmt: skip
    header = [
        "log10 κ bin", "log10 κ", "CG f64 iters", "err", "f32 CMVP iters", "err",
        f"PCG r={rank} iters", "err", "time f32/f64", "per iter", "time PCG/CG", "+build",
    ]  # fmt: skip
    print_table(
        f"Fig. 2: CG to relative residual {EPS:g} on K̂ s = y (err = ‖s − s*‖/‖s*‖, "
        f"s* Cholesky; maxiter 10n = {10 * X.shape[0]})",
        header,
        rows,
    )
    return out


# --------------------------------------------------------------------------- Fig. 3
def log10_str(v: float) -> str:
    if v == -math.inf:
        return "-inf (all equal)"
    return f"{v:.1f}" if abs(v) < 1e3 else f"{v:.3g}"


def fig3(
    systems: dict[int, dict[str, object]],
    y: torch.Tensor,
    estimates: int,
    generator: torch.Generator,
) -> None:
    """ULISSE iterations and spread of the solution per bin and ``(q, β)``."""
    n = y.shape[0]
    rows = []
    for b, s in systems.items():
        A, s_star, errors = s["A"], s["s_star"], s["errors"]
        cg_iters = s["cg_iters"]
        for q in Q_VALUES:
            for beta in BETAS:
                x, info = pn.randomized.ulisse(
                    A, y, alpha=q * math.sqrt(n), beta=beta, generator=generator,
                    num_estimates=estimates,
                )  # fmt: skip
                l = int(info.threshold_iterations)
                iters = l + float(info.roulette_steps.double().mean())
                sd = x.std(dim=0)
                avg_sd = float(sd.mean())
                rms_sd = math.sqrt(float(sd.square().mean()))
                l_err = min(l, errors.numel() - 1)
                exact = 0.5 * (pn.randomized.ulisse_variance(errors, l_err, beta, log10=True)
                               - math.log10(n))  # fmt: skip
                mean_err = float((x.mean(dim=0) - s_star).norm() / s_star.norm())
                rows.append(
                    [
                        f"[{b},{b + 1})", round(float(s["log10k"]), 2), q, beta, l,
                        f"{iters:.1f}", ratio(iters, cg_iters) if cg_iters else "—",
                        log10_str(math.log10(avg_sd) if avg_sd > 0 else -math.inf),
                        log10_str(math.log10(rms_sd) if rms_sd > 0 else -math.inf),
                        log10_str(exact), mean_err,
                    ]
                )  # fmt: skip
    header = [
        "log10 κ bin", "log10 κ", "q", "β", "l", "iters", "iters/CG",
        "log10 avg sd", "log10 rms sd", "exact log10 rms sd (≥)", "mean err",
    ]  # fmt: skip
    print_table(
        f"Fig. 3: ULISSE on K̂ s = y, α = q√n, {estimates} estimates per setting "
        "(exact: log10 √(tr Cov/n) from CG's error norms)",
        header,
        rows,
    )


# --------------------------------------------------------------------------- Fig. 4
def gradient_errors(
    params: LogHyperparameters,
    X: torch.Tensor,
    y: torch.Tensor,
    theta: torch.Tensor,
    g: torch.Tensor,
    method: str,
    alpha: float,
    reps: int,
    generator: torch.Generator,
) -> tuple[list[float], list[int]]:
    """``log10 ‖g − g̃‖²/‖g‖²`` and products of ``reps`` independent one-probe estimates."""
    errs, prods = [], []
    gnorm2 = float(g.square().sum())
    for _ in range(reps):
        est = LogMarginalGradient(
            params, X, y, method=method, generator=generator, num_probes=1,
            alpha=alpha, beta=GRADIENT_BETA,
        )  # fmt: skip
        ge = est(theta)
        errs.append(math.log10(float((ge.grad - g).square().sum()) / gnorm2))
        prods.append(ge.products)
    return errs, prods


def fig4(
    systems: dict[int, dict[str, object]],
    params: LogHyperparameters,
    X: torch.Tensor,
    y: torch.Tensor,
    reps: int,
    cg_reps: int,
    generator: torch.Generator,
) -> None:
    """Relative squared error of one-probe gradient estimates, CG vs ULISSE, per bin."""
    n = X.shape[0]
    methods = [("CG", "cg", EPS, cg_reps)] + [
        (f"U q={q:g}", "ulisse", q, reps) for q in Q_VALUES
    ]  # fmt: skip
    rows = []
    skipped = [b for b, s in systems.items() if not s["cg_converged"]]
    for b, s in systems.items():
        if b in skipped:
            continue
        theta = s["theta"]
        _, g = exact_log_marginal(params, X, y, theta, grad=True)
        assert g is not None
        cells_err, cells_mse, cells_prod = [], [], []
        cg_prods = None
        for _, method, q, r in methods:
            errs, prods = gradient_errors(
                params, X, y, theta, g, method, q * math.sqrt(n), r, generator
            )
            se = statistics.stdev(errs) / math.sqrt(len(errs))
            cells_err.append(f"{statistics.mean(errs):.2f} ± {se:.2f}")
            mean_rel = statistics.mean(10.0**e for e in errs)
            cells_mse.append(round(math.log10(mean_rel), 2))
            p = statistics.mean(prods)
            if method == "cg":
                cg_prods = p
                cells_prod.append(round(p, 1))
            else:
                suffix = f" ({ratio(p, cg_prods):.3f}×)" if cg_prods else ""
                cells_prod.append(f"{p:.1f}{suffix}")
        label = f"[{b},{b + 1})"
        rows.append([label, round(float(s["log10k"]), 2), *cells_err, *cells_mse, *cells_prod])
    labels = [m[0] for m in methods]
    header = [
        "log10 κ bin", "log10 κ",
        *[f"{lb}: mean log10 err" for lb in labels],
        *[f"{lb}: log10 mean" for lb in labels],
        *[f"{lb}: products" for lb in labels],
    ]  # fmt: skip
    print_table(
        f"Fig. 4: log10 ‖g − g̃‖²/‖g‖², one probe, β = {GRADIENT_BETA:g}; "
        f"{reps} repetitions (CG: {cg_reps}); products per gradient (ratio to CG)",
        header,
        rows,
    )
    if skipped:
        print(f"bins {skipped} left out: CG did not reach {EPS:g} within 10n steps (Fig. 2)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_N}-point subset, fewer draws")
    parser.add_argument("--draws", type=int, default=None, help="prior draws for Fig. 1")
    parser.add_argument("--reps", type=int, default=None, help="ULISSE gradients per bin (Fig. 4)")
    parser.add_argument("--cg-reps", type=int, default=None, help="CG gradients per bin (Fig. 4)")
    parser.add_argument("--estimates", type=int, default=None, help="ULISSE estimates (Fig. 3)")
    parser.add_argument("--timing-repeats", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=THREADS, help="torch threads")
    add_resume_arguments(parser)
    args = parser.parse_args()
    store = ResultStore.from_args(__file__, args)
    torch.set_num_threads(args.threads)
    quick = args.quick
    draws = args.draws or (60 if quick else 100)
    reps = args.reps or (30 if quick else 100)
    cg_reps = args.cg_reps or (10 if quick else 20)
    estimates = args.estimates or (50 if quick else 100)
    repeats = args.timing_repeats or (1 if quick else 2)
    start = time.perf_counter()

    X, y = load_data(quick, torch.Generator().manual_seed(args.seed))
    params = LogHyperparameters(
        pn.kernels.RBF(lengthscale=1.0, outputscale=1.0), 1.0,
        parametrization="log_tau", priors=PRIORS,
    )  # fmt: skip
    print(f"Concrete (UCI split 0 training inputs), n = {X.shape[0]}, d = {X.shape[1]}, "
          f"threads = {torch.get_num_threads()}")  # fmt: skip
    t = time.perf_counter()
    # one unit per figure, its printed table saved with it (each figure has its own seed)
    cases = store.printed_unit(
        "fig1", lambda: fig1(params, X, draws, torch.Generator().manual_seed(args.seed + 1))
    )
    print(f"(Fig. 1: {time.perf_counter() - t:.0f} s)")
    t = time.perf_counter()
    systems = store.printed_unit(  # saved without the matrices K̂, rebuilt from θ
        "fig2", lambda: _drop_A(fig2(cases, params, X, y, PCG_RANK[quick], repeats))
    )
    for s in systems.values():
        s["A"] = system(params, X, s["theta"])
    print(f"(Fig. 2: {time.perf_counter() - t:.0f} s)")
    t = time.perf_counter()
    store.printed_unit(
        "fig3", lambda: fig3(systems, y, estimates, torch.Generator().manual_seed(args.seed + 2))
    )
    print(f"(Fig. 3: {time.perf_counter() - t:.0f} s)")
    t = time.perf_counter()
    store.printed_unit("fig4", lambda: fig4(
        systems, params, X, y, reps, cg_reps, torch.Generator().manual_seed(args.seed + 3)
    ))  # fmt: skip
    print(f"(Fig. 4: {time.perf_counter() - t:.0f} s)\ntotal {time.perf_counter() - start:.0f} s")
    print(store.summary(), file=sys.stderr)
    return 0


def _drop_A(systems: dict[int, dict[str, object]]) -> dict[int, dict[str, object]]:
    """``systems`` without the matrices ``"A"`` (rebuilt from ``"theta"`` when loaded)."""
    return {b: {k: v for k, v in s.items() if k != "A"} for b, s in systems.items()}


if __name__ == "__main__":
    sys.exit(main())
