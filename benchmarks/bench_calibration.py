"""Calibration study: which computational uncertainty can be trusted, and at what accuracy.

The tables of ``docs/calibration.md`` come from this script.

**Setting.** Three real input sets (``concrete`` d = 8, ``elevators`` d = 18,
``protein`` d = 9; UCI split 0 training inputs, a seeded random subset of
``N_TRAIN + N_TEST`` rows, standardised), a Matérn-3/2 kernel with outputscale 1 and
lengthscale the median pairwise distance, noise ``σ² ∈ {0.1, 0.01}``. Data are drawn
from the model itself: ``f ~ GP(0, k)`` jointly at ``[X; Xs]``, ``y = f(X) + σ ε``. The
exact GP (Cholesky) is the reference.

**Statistics** (``pn.metrics.CalibrationStatistics``): per draw the mean of ``z²`` and
the fraction of test points inside the central 95 % interval, then mean ± standard
error over draws. *Computational*: ``z = (μ_i − μ*) / √comp_var``; *combined*:
``z = (μ_i − f) / √var``. Points whose computational variance is at rounding level are
excluded from the computational statistics (reported as ``excl``). *Error*: the
relative error ``‖μ_i − μ*‖ / ‖μ*‖`` on the test points, averaged over draws, divided by
CG's at the same budget. *Products*: products with ``K̂`` (or passes over its rows)
spent, the budget ``i``; affine methods run ``⌊i / cost per sweep⌋`` sweeps.

**Methods.** IterGP with the policies ``CG`` (the default), ``UnitVector("pivot")``
(adaptive), CG with ``comp_var_scale="residual"`` (a heuristic), and the non-adaptive
``Random``, ``UnitVector("random")``, ``UnitVector("schur")``, ``Lanczos(start="random")``,
``PivotedCholesky``; ``AffineGP`` with symmetric ``GaussSeidel``, ``Jacobi``,
``Chebyshev(lower=σ²)`` and ``CyclicProjections``. ``Lanczos()`` from the residual spans
CG's Krylov space, so under the inverse prior its belief is CG's and it is not listed.

**How it is computed.** A non-adaptive policy's actions do not depend on ``y``, so its
belief's root ``V`` (``C_i = V Vᵀ``) at every budget comes from one solver run per action
seed and serves all draws at once: ``μ_i = k(Xs, X) V Vᵀ y``. Affine methods likewise
use one ``P_m`` for all draws. Adaptive policies run the solver once per draw
(``ProbabilisticLinearSolver.iterate``, every budget from one run). The first draw of
every method is checked against ``IterGP.fit(...).posterior`` / ``AffineGP`` (same
mean and variance up to rounding), so the study measures the public classes.

**Time.** Seconds of ``fit`` + posterior variance at 50 products on one draw
(interleaved medians), divided by CG's.

Usage: ``python benchmarks/bench_calibration.py [--quick] [--json FILE] [--plot FILE]
[--datasets ...] [--noises ...] [--budgets ...] [--n-train N]`` (``--quick``: concrete
only, σ² = 0.1, fewer draws; the full study takes about 20 minutes on 2 cores; the
``n = 2000`` rows of ``docs/calibration.md`` come from ``--n-train 2000 --noises 0.01
--budgets 5 10 20 50 --datasets elevators protein``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ResultStore, add_resume_arguments, interleaved_medians, print_table, ratio

import pnsolve as pn
from pnsolve.metrics import CalibrationStatistics

F64 = torch.float64
BUDGETS = (5, 10, 20, 50, 100, 200)
DATASETS = ("concrete", "elevators", "protein")
NOISES = (0.1, 0.01)
N_TRAIN, N_TEST = 400, 100
ACTION_SEEDS = 5  # non-adaptive policies: independent action draws, DRAWS_PER_SEED each
DRAWS_PER_SEED = 200
ADAPTIVE_DRAWS = 200  # adaptive policies: one solver run per draw
TIME_BUDGET = 50
BLOCK = 40  # CyclicProjections: n/10 rows per block (set-up flops ≈ one product)
LANCZOS = 10  # set-up products of Jacobi and Chebyshev (their eigenvalue estimate)


# ----------------------------------------------------------------------------- problem
@dataclass
class Problem:
    """Inputs, kernel, noise and the exact GP quantities of one study cell."""

    name: str
    X: torch.Tensor
    Xs: torch.Tensor
    kernel: pn.kernels.Matern
    noise: float
    Khat: torch.Tensor  # (n, n)
    Ks: torch.Tensor  # k(X, Xs), (n, t)
    prior_var: torch.Tensor  # (t,)
    math_var: torch.Tensor  # (t,)
    chol: torch.Tensor
    root: torch.Tensor  # Cholesky root of the joint prior covariance at [X; Xs]

    def draws(self, count: int, generator: torch.Generator):
        """``(F_s, Y, exact mean)``: latent at ``Xs`` ``(t, D)``, targets ``(n, D)``, ``μ*``."""
        n = self.X.shape[0]
        F = self.root @ torch.randn(self.root.shape[0], count, generator=generator, dtype=F64)
        E = torch.randn(n, count, generator=generator, dtype=F64)
        Y = F[:n] + math.sqrt(self.noise) * E
        exact = self.Ks.mT @ torch.cholesky_solve(Y, self.chol)
        return F[n:], Y, exact


def load_inputs(name: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded subset of ``N_TRAIN + N_TEST`` training inputs of ``name``, standardised."""
    ds = pn.datasets.load_uci(name, split=0, dtype=F64)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(ds.X_train.shape[0], generator=g)[: N_TRAIN + N_TEST]
    Z = ds.X_train[idx]
    Z = (Z - Z.mean(0)) / Z.std(0, correction=0).clamp_min(1e-12)
    return Z[:N_TRAIN], Z[N_TRAIN:]


def make_problem(name: str, X: torch.Tensor, Xs: torch.Tensor, noise: float) -> Problem:
    """Kernel with the median-distance lengthscale and the exact GP at ``Xs``."""
    Z = torch.cat([X, Xs])
    ell = float(torch.cdist(Z, Z)[torch.triu_indices(len(Z), len(Z), 1).unbind()].median())
    kernel = pn.kernels.Matern(nu=1.5, lengthscale=ell)
    with torch.no_grad():
        Kall = kernel(Z)
        n = X.shape[0]
        jitter = math.sqrt(torch.finfo(F64).eps) * float(Kall.diagonal().mean())
        root = torch.linalg.cholesky(Kall + jitter * torch.eye(len(Z), dtype=F64))
        Khat = Kall[:n, :n] + noise * torch.eye(n, dtype=F64)
        chol = torch.linalg.cholesky(Khat)
        Ks = Kall[:n, n:]
        half = torch.linalg.solve_triangular(chol, Ks, upper=False)
        prior_var = Kall.diagonal()[n:].clone()
        math_var = prior_var - half.square().sum(0)
    return Problem(name, X, Xs, kernel, noise, Khat, Ks, prior_var, math_var, chol, root)


# ----------------------------------------------------------------------------- methods
@dataclass
class Method:
    """A study entry: how to build it and whether its uncertainty claims calibration."""

    label: str
    kind: str  # "policy" (non-adaptive, batched), "adaptive", "affine"
    make: Callable[[Problem, int], object]  # (problem, budget) -> policy or AffineMethod
    rescaled: str | None = None  # also report comp_var_scale="residual" under this label


def methods() -> list[Method]:
    """Every method of the study, CG first."""
    P, It = pn.policies, pn.iterative

    def sweeps(budget: int, per_sweep: int, setup: int = 0) -> int:
        return max(1, (budget - setup) // per_sweep)

    return [
        Method("CG", "adaptive", lambda p, i: P.CG(), rescaled="CG, residual-rescaled"),
        Method("UnitVector(pivot)", "adaptive", lambda p, i: P.UnitVector("pivot")),
        Method("Random", "policy", lambda p, i: P.Random()),
        Method("UnitVector(random)", "policy", lambda p, i: P.UnitVector("random")),
        Method("UnitVector(schur)", "policy", lambda p, i: P.UnitVector("schur")),
        Method("Lanczos(random)", "policy", lambda p, i: P.Lanczos(start="random")),
        Method("PivotedCholesky", "policy", lambda p, i: P.PivotedCholeskyActions()),
        Method("GaussSeidel (sym)", "affine", lambda p, i: It.GaussSeidel(sweeps(i, 2))),
        Method("Jacobi", "affine", lambda p, i: It.JacobiIteration(sweeps(i, 1, LANCZOS))),
        Method(
            "Chebyshev", "affine", lambda p, i: It.Chebyshev(sweeps(i, 1, LANCZOS), lower=p.noise)
        ),
        Method(
            "CyclicProjections",
            "affine",
            lambda p, i: It.CyclicProjections(sweeps(i, 1), block_size=BLOCK),
        ),
    ]


@dataclass
class Cell:
    """One (method, budget) result on one problem."""

    comp: CalibrationStatistics
    comb: CalibrationStatistics
    error: float  # mean relative error of the posterior mean against the exact GP's
    products: int
    excluded: float  # fraction of points excluded from the computational statistics


def _cell(problem: Problem, mean, var, F, exact, products: int) -> Cell:
    """Statistics from means ``(t, D)`` and variances ``(t,)`` or ``(t, D)``."""
    if var.ndim == 1:
        var = var.unsqueeze(-1).expand_as(mean)
    floor = math.sqrt(torch.finfo(F64).eps) * float(problem.prior_var.max())
    comp = var - problem.math_var.unsqueeze(-1)
    ok = comp > floor
    z_comp = torch.where(ok, (mean - exact) / comp.clamp_min(floor).sqrt(), math.nan)
    z_comb = (mean - F) / var.clamp_min(floor).sqrt()
    err = torch.linalg.vector_norm(mean - exact, dim=0) / torch.linalg.vector_norm(exact, dim=0)
    return Cell(
        CalibrationStatistics.from_z(z_comp.mT),
        CalibrationStatistics.from_z(z_comb.mT),
        float(err.mean()),
        products,
        float((~ok).double().mean()),
    )


def _merge(cells: list[Cell]) -> Cell:
    """Pool cells over action seeds (equal draws each): statistics over all draws."""
    if len(cells) == 1:
        return cells[0]

    def pool(stats: list[CalibrationStatistics]) -> CalibrationStatistics:
        d = sum(s.draws for s in stats)
        mean = sum(s.mean_z2 * s.draws for s in stats) / d
        # per-draw variance recovered from each SE, plus the spread between seeds
        ss = sum((s.mean_z2_se**2 * s.draws * (s.draws - 1)) for s in stats)
        ss += sum(s.draws * (s.mean_z2 - mean) ** 2 for s in stats)
        cov = sum(s.coverage * s.draws for s in stats) / d
        css = sum(s.coverage_se**2 * s.draws * (s.draws - 1) for s in stats)
        css = css + sum(s.draws * (s.coverage - cov) ** 2 for s in stats)
        return CalibrationStatistics(
            mean_z2=mean,
            mean_z2_se=math.sqrt(ss / (d - 1) / d),
            levels=stats[0].levels,
            coverage=cov,
            coverage_se=(css / (d - 1) / d).sqrt(),
            draws=d,
            excluded=sum(s.excluded for s in stats),
        )

    return Cell(
        pool([c.comp for c in cells]),
        pool([c.comb for c in cells]),
        sum(c.error for c in cells) / len(cells),
        cells[0].products,
        sum(c.excluded for c in cells) / len(cells),
    )


def _budgeted_states(policy, problem: Problem, y: torch.Tensor, seed: int, budgets):
    """``{budget: state}`` from one solver run (a breakdown's state serves later budgets)."""
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(max(budgets)))
    out, last = {}, None
    g = torch.Generator().manual_seed(seed)
    for state in solver.iterate(problem.Khat, y, generator=g):
        last = state
        if state.iteration in budgets:
            out[state.iteration] = state
    for i in budgets:
        out.setdefault(i, last)
    return out


def run_policy(method: Method, problem: Problem, budgets, draws: int, seed: int):
    """A non-adaptive policy: one solver run per action seed, all draws batched."""
    per_budget: dict[int, list[Cell]] = {i: [] for i in budgets}
    gen = torch.Generator().manual_seed(10_000 + seed)
    for s in range(ACTION_SEEDS):
        F, Y, exact = problem.draws(draws, gen)
        states = _budgeted_states(method.make(problem, 0), problem, Y[:, 0], seed + s, budgets)
        for i in budgets:
            V = states[i].belief.V
            KV = problem.Ks.mT @ V
            mean = KV @ (V.mT @ Y)
            var = problem.prior_var - KV.square().sum(1)
            if s == 0 and i == budgets[0]:
                _check_itergp(method, problem, Y[:, 0], i, seed + s, mean[:, 0], var)
            per_budget[i].append(_cell(problem, mean, var, F, exact, states[i].products))
    return {i: _merge(c) for i, c in per_budget.items()}


def run_adaptive(method: Method, problem: Problem, budgets, draws: int, seed: int):
    """An adaptive policy: one solver run per draw (every budget from the run)."""
    gen = torch.Generator().manual_seed(20_000 + seed)
    F, Y, exact = problem.draws(draws, gen)
    means = {i: torch.empty_like(F) for i in budgets}
    vars_ = {i: torch.empty_like(F) for i in budgets}
    products = {}
    trace = float(problem.Khat.diagonal().sum())
    scaled = {i: torch.empty_like(F) for i in budgets}
    for d in range(draws):
        states = _budgeted_states(method.make(problem, 0), problem, Y[:, d], seed, budgets)
        for i in budgets:
            belief = states[i].belief
            KV = problem.Ks.mT @ belief.V
            var = problem.prior_var - KV.square().sum(1)
            means[i][:, d] = KV @ (belief.V.mT @ Y[:, d])
            vars_[i][:, d] = var
            products[i] = states[i].products
            if method.rescaled:  # the residual heuristic of IterGP.residual_scale
                predicted = trace - float(belief.W.square().sum())
                scale = float(states[i].residual_norm) ** 2 / predicted if predicted > 0 else 1.0
                scaled[i][:, d] = problem.math_var + scale * (var - problem.math_var)
            if d == 0 and i == budgets[0]:
                _check_itergp(method, problem, Y[:, 0], i, seed, means[i][:, 0], var)
                if method.rescaled:
                    _check_itergp(
                        method,
                        problem,
                        Y[:, 0],
                        i,
                        seed,
                        means[i][:, 0],
                        scaled[i][:, 0],
                        rescale=True,
                    )
    out = {
        method.label: {
            i: _cell(problem, means[i], vars_[i], F, exact, products[i]) for i in budgets
        }
    }
    if method.rescaled:
        out[method.rescaled] = {
            i: _cell(problem, means[i], scaled[i], F, exact, products[i]) for i in budgets
        }
    return out


def run_affine(method: Method, problem: Problem, budgets, draws: int, seed: int):
    """An affine method: one ``P_m`` per budget, all draws batched."""
    gen = torch.Generator().manual_seed(30_000 + seed)
    F, Y, exact = problem.draws(ACTION_SEEDS * draws, gen)
    out = {}
    for i in budgets:
        gp = pn.gp.AffineGP(problem.kernel, problem.noise, method.make(problem, i))
        gp.fit(problem.X, Y[:, 0])
        post = gp.posterior(problem.Xs)
        P = gp.belief.P
        mean = problem.Ks.mT @ P.matmat(Y)
        _close(mean[:, 0], post.mean, f"{method.label} mean")
        products = gp.info.products + gp.info.row_passes
        out[i] = _cell(problem, mean, post.var, F, exact, products)
    return out


def _check_itergp(method, problem, y, budget, seed, mean, var, rescale=False) -> None:
    """The batched path must reproduce the public ``IterGP`` posterior."""
    policy = method.make(problem, budget)
    gp = pn.gp.IterGP(problem.kernel, problem.noise, policy, pn.stopping.MaxIterations(budget)).fit(
        problem.X, y, generator=torch.Generator().manual_seed(seed)
    )
    post = gp.posterior(problem.Xs, comp_var_scale="residual" if rescale else None)
    assert post.calibrated == (method.kind == "policy"), (method.label, post.calibrated)
    _close(mean, post.mean, f"{method.label} mean")
    _close(var, post.var, f"{method.label} var")


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    tol = 1e-6 * (1.0 + float(b.abs().max()))
    err = float((a - b).abs().max())
    assert err <= tol, f"{what}: batched study path differs from the public class by {err:.2e}"


RUNNERS = {"policy": run_policy, "adaptive": run_adaptive, "affine": run_affine}


# ----------------------------------------------------------------------------- timing
def time_methods(problem: Problem, budget: int, repeats: int) -> dict[str, float]:
    """Seconds of fit + posterior variance at ``budget`` products on one draw."""
    y = problem.draws(1, torch.Generator().manual_seed(7))[1][:, 0]
    fns = {}
    for m in methods():
        if m.kind == "affine":

            def fn(m=m):
                gp = pn.gp.AffineGP(problem.kernel, problem.noise, m.make(problem, budget))
                return gp.fit(problem.X, y).posterior(problem.Xs).var

        else:

            def fn(m=m):
                gp = pn.gp.IterGP(
                    problem.kernel,
                    problem.noise,
                    m.make(problem, budget),
                    pn.stopping.MaxIterations(budget),
                )
                g = torch.Generator().manual_seed(0)
                return gp.fit(problem.X, y, generator=g).posterior(problem.Xs).var

        fns[m.label] = fn
    return interleaved_medians(fns, repeats)


# ----------------------------------------------------------------------------- report
def _fmt_stat(cell: Cell, part: str) -> str:
    if part == "comp" and cell.excluded >= 1.0:
        return "— (none left)"
    s = getattr(cell, part)
    cov, _ = s.coverage_at(0.95)
    return f"{s.mean_z2:.3g}±{s.mean_z2_se:.2g} / {cov:.3f}"


def report(name: str, noise: float, results: dict[str, dict[int, Cell]], budgets) -> None:
    """Print the three tables of one problem."""
    head = ["method", *[f"i={i}" for i in budgets]]
    for part in ("comp", "comb"):
        rows = [
            [label, *[_fmt_stat(cells[i], part) for i in budgets]]
            for label, cells in results.items()
        ]
        what = "computational" if part == "comp" else "combined"
        print_table(f"{name}, σ²={noise}: {what} E[z²]±SE / 95 % coverage", head, rows)
    cg = results["CG"]
    rows = [
        [label, *[f"{ratio(cells[i].error, cg[i].error):.3g}" for i in budgets]]
        for label, cells in results.items()
    ]
    rows.append(["(CG's relative error)", *[f"{cg[i].error:.2e}" for i in budgets]])
    print_table(f"{name}, σ²={noise}: mean error ÷ CG's at equal budget", head, rows)


def summarise(all_results, budgets) -> dict[str, object]:
    """Targets: calibrated rows within |E[z²]−1| ≤ 0.1 and coverage ± 0.01."""
    calibrated = [m.label for m in methods() if m.kind in ("policy", "affine")]
    worst: dict[str, float] = {m: 0.0 for m in calibrated}
    worst_cov: dict[str, float] = {m: 0.0 for m in calibrated}
    best50: dict[str, tuple[str, float]] = {}
    for key, results in all_results.items():
        for m in calibrated:
            for i in budgets:
                for part in ("comp", "comb"):
                    if part == "comp" and results[m][i].excluded >= 1.0:
                        continue
                    s = getattr(results[m][i], part)
                    worst[m] = max(worst[m], abs(s.mean_z2 - 1.0))
                    worst_cov[m] = max(worst_cov[m], abs(s.coverage_at(0.95)[0] - 0.95))
        if 50 in budgets:
            cg = results["CG"][50].error
            label = min(calibrated, key=lambda m: results[m][50].error)
            best50[key] = (label, results[label][50].error / cg)
    rows = [[m, f"{worst[m]:.3f}", f"{worst_cov[m]:.3f}"] for m in calibrated]
    print_table(
        "calibrated options: worst |E[z²]−1| and |coverage−0.95| over every cell",
        ["method", "max |E[z²]−1|", "max |cov95−0.95|"],
        rows,
    )
    if best50:
        print_table(
            "best calibrated option at 50 products: its error ÷ CG's",
            ["problem", "method", "error ÷ CG"],
            [[k, m, f"{r:.3g}"] for k, (m, r) in best50.items()],
        )
    return {"worst_z2": worst, "worst_coverage": worst_cov, "best_at_50": best50}


def _to_json(all_results, times) -> dict[str, object]:
    out: dict[str, object] = {"times": times, "cells": []}
    cells = out["cells"]
    assert isinstance(cells, list)
    for key, results in all_results.items():
        for label, by_budget in results.items():
            for i, c in by_budget.items():
                cells.append(
                    {
                        "problem": key,
                        "method": label,
                        "budget": i,
                        "products": c.products,
                        "error": c.error,
                        "excluded": c.excluded,
                        **{
                            f"{part}_{name}": val
                            for part, s in (("comp", c.comp), ("comb", c.comb))
                            for name, val in (
                                ("mean_z2", s.mean_z2),
                                ("mean_z2_se", s.mean_z2_se),
                                ("cov95", s.coverage_at(0.95)[0]),
                                ("cov95_se", s.coverage_at(0.95)[1]),
                                ("draws", s.draws),
                            )
                        },
                    }
                )
    return out


def run_method(m: Method, problem: Problem, budgets, seed: int) -> dict[str, dict[int, Cell]]:
    """One method's cells by budget (two labels for the adaptive method)."""
    if m.kind == "adaptive":
        return run_adaptive(m, problem, budgets, ADAPTIVE_DRAWS, seed)
    return {m.label: RUNNERS[m.kind](m, problem, budgets, DRAWS_PER_SEED, seed)}


def main() -> None:
    global ACTION_SEEDS, DRAWS_PER_SEED, ADAPTIVE_DRAWS, N_TRAIN, BLOCK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="concrete, σ² = 0.1, 40 draws")
    parser.add_argument("--json", type=Path, default=None, help="write every cell here")
    parser.add_argument("--plot", type=Path, default=None, help="coverage plot PNG")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--noises", nargs="+", type=float, default=list(NOISES))
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument("--n-train", type=int, default=N_TRAIN, help="training subset size")
    add_resume_arguments(parser)
    args = parser.parse_args()
    if args.n_train != N_TRAIN:
        N_TRAIN, BLOCK = args.n_train, max(1, args.n_train // 10)
    datasets, noises, budgets = args.datasets, args.noises, tuple(sorted(args.budgets))
    if args.quick:
        datasets, noises, budgets = ("concrete",), (0.1,), (5, 20, 50)
        ACTION_SEEDS, DRAWS_PER_SEED, ADAPTIVE_DRAWS = 2, 20, 40
    store = ResultStore.from_args(__file__, args, ignore=("json", "plot", "datasets", "noises"))
    torch.set_grad_enabled(False)
    all_results: dict[str, dict[str, dict[int, Cell]]] = {}
    times: dict[str, dict[str, float]] = {}
    t0 = time.perf_counter()
    for d_index, name in enumerate(datasets):
        X, Xs = load_inputs(name)
        for noise in noises:
            problem = make_problem(name, X, Xs, noise)
            key = f"{name} σ²={noise}" if N_TRAIN == 400 else f"{name} n={N_TRAIN} σ²={noise}"
            results: dict[str, dict[int, Cell]] = {}
            for m_index, m in enumerate(methods()):
                seed = 1000 * d_index + 10 * m_index
                results |= store.unit(
                    store.key(key, m.label), run_method, m, problem, budgets, seed
                )
                print(f"  {key}: {m.label} done ({time.perf_counter() - t0:.0f} s)", flush=True)
            all_results[key] = results
            report(key, noise, results, budgets)
            t = store.unit(store.key(key, "times"), time_methods, problem,
                           min(TIME_BUDGET, max(budgets)), 2 if args.quick else 5)  # fmt: skip
            times[key] = {label: ratio(v, t["CG"]) for label, v in t.items()}
            print_table(
                f"{key}: time of fit + posterior variance at {TIME_BUDGET} products ÷ CG's",
                ["method", "÷ CG"],
                [[label, f"{r:.2f}"] for label, r in times[key].items()],
            )
    summary = summarise(all_results, budgets)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = _to_json(all_results, times) | {"summary": summary}
        args.json.write_text(json.dumps(payload, indent=1, default=str))
    if args.plot is not None:
        key = next(iter(all_results))
        early, late = budgets[0], 20 if 20 in budgets else budgets[-1]
        curves = {f"CG, i={i}": all_results[key]["CG"][i].comp for i in (early, late)}
        for m in ("Lanczos(random)", "PivotedCholesky", "GaussSeidel (sym)"):
            curves |= {f"{m}, i={i}": all_results[key][m][i].comp for i in (early, late)}
        pn.plotting.plot_coverage(curves, args.plot, title=f"comp_var, {key}, prior draws")
        print(f"wrote {args.plot}")
    print(store.summary(), file=sys.stderr)


if __name__ == "__main__":
    main()
