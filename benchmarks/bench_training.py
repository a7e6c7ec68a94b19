"""Iterative GP hyperparameter training (Lin et al., 2024) at CPU scale.

Reproduces **Table 1** (test metrics, solver epochs and speed-ups of the pathwise
estimator and warm starts) and the **early-stopping study** of §5 / Figure 9 with
:func:`pnsolve.gp.training.train_hyperparameters`.

1. **Table 1.** UCI pol, elevators and bike (``pn.datasets.load_uci``, split 0,
   standardised with the training statistics). The training set is subsampled to
   ``n`` rows with a fixed generator (``--n``, default 1000); the test set stays
   complete. Matérn-3/2 ARD kernel, every hyperparameter starts at 1.0, Adam with
   learning rate 0.1 for ``--steps`` steps (default 100, the paper's), tolerance
   0.01 on the mean system and on the average probe system, 64 probes, 2000 random
   Fourier features for the pathwise estimator, float64. The paper's speed-ups come
   from the late, ill-conditioned steps: at ``n = 1000`` pol's noise variance falls to
   0.002 by step 100, where a cold AP solve with the standard estimator needs more than
   the per-step cap of 1000 epochs. The full run takes about 40 min on the 2-core CPU
   machine (two processes, ``--jobs 2``, the default); ``--n 500 --steps 50
   --no-early-stopping`` about 3 min.
   Variants: ``exact`` (dense Cholesky + autograd: the reference) and {CG, AP, SGD} ×
   {standard, pathwise} × {cold, warm} (``--solvers`` picks a subset). CG uses a
   rank-100 pivoted-Cholesky preconditioner (the paper's rank, *not* scaled with
   ``n``). The AP block size and the SGD batch size keep the paper's ratios ``b/N``
   (``b = 1000`` and ``500`` at the full training size ``N`` of each data set), e.g.
   74 and 37 on pol at ``n = 1000``. Every step's iterations are capped at ``--cap`` epochs (default
   1000, a guard like the paper's time limit; steps that hit it count as unconverged).
   The SGD learning rate is tuned per data set as in the paper's App. B: the largest
   rate of a grid that does not make the first outer step's solve diverge (both
   estimators' right-hand sides, solved cold at the initial hyperparameters); the
   grid is the paper's ``5, 10, …, 100`` extended downwards by ``0.5, 1, 2`` because
   the scaled batches are small, and a solve that does not reach the tolerance within
   the cap counts as divergent (a rate at the edge of stability oscillates for the
   whole budget, and one such step's gradient spoils Adam for the rest of the run).
   Should a training run still diverge later, it is restarted with half the rate
   (reported in the table). Momentum 0.9.

   Per run: test RMSE and test log-likelihood of the exact GP posterior
   (``predictive(..., method="cholesky")``) at the learned hyperparameters, total
   solver epochs, total training time (solves + gradients + Adam, prediction
   excluded), the steps whose solve missed the tolerance, and the speed-up over
   standard-cold of the same solver (ratio of epochs and of time). Then the average
   speed-up over the data sets (arithmetic mean of the per-data-set ratios, as the
   paper's "average speed-up") and the targets: pathwise + warm start
   needs ≥ 2× fewer epochs than standard-cold with CG and ≥ 10× with AP, and every
   run's test log-likelihood is within 0.02 of exact-gradient training.

2. **Early stopping** (§5, Fig. 9) on one data set (``--es-dataset``, default pol,
   same ``n`` and steps): for CG, AP and SGD, budgets of 10, 20 and 50 solver
   epochs per step (a solve stops at the tolerance or the budget), pathwise estimator
   warm and cold, and the standard estimator cold as the baseline. Per run: relative
   residual norm of the probe systems (mean over steps and at the last step), the
   mean system's final residual, total epochs and the final test log-likelihood;
   the unbudgeted runs of table 1 appear as budget ``tol``. As in the paper's loop,
   every step's gradient is applied (``max_step_residual=None``), also after a solve
   whose budget ran out above a relative residual of 1. Figure: probe residual
   norm per step, one panel per solver, a colour per budget, solid warm / dashed
   cold pathwise / dotted standard cold (``training_early_stopping.png``), and the
   training curves of table 1 on the same data set via
   :func:`pnsolve.plotting.plot_training` (``training_curves.png``).

Epochs (one epoch = every entry of ``K̂`` once, counted exactly by
:class:`pnsolve.iterative.KernelSystem`) are the figure of merit; wall times come
from a shared machine and are only indicative (all ratios are measured side by side
in one run, one thread, same generator seed). The benchmark runs torch on one thread:
with another job on the 2 cores, two threads were up to 50× slower.

Usage: ``python benchmarks/bench_training.py [--quick] [--datasets pol elevators bike]
[--n 1000] [--steps 100] [--solvers cg ap sgd] [--es-dataset pol] [--budgets 10 20 50]
[--no-early-stopping] [--no-baseline] [--cap 1000] [--figures DIR] [--jobs 2]
[--results DIR]``. ``--jobs`` runs the independent training runs in parallel
processes (one torch thread each); ``--results`` saves each table-1 unit and reuses it
in a later invocation with the same settings.
``--quick`` (tiny sizes, < 2 min) writes its figures to ``outputs/bench_training``;
the full run writes them to ``docs/img``.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import pickle
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ResultStore, add_resume_arguments, print_table, ratio

import pnsolve as pn
from pnsolve.gp.training import (
    TrainingConfig,
    TrainingResult,
    make_estimator,
    predictive,
    train_hyperparameters,
)
from pnsolve.iterative import KernelSystem, StochasticGradientDescent
from pnsolve.kernels import Matern

ROOT = Path(__file__).resolve().parents[1]
SOLVERS = ("cg", "ap", "sgd")
# (estimator, warm start) in the paper's row order: base, pathwise, warm, both
VARIANTS = (("standard", False), ("pathwise", False), ("standard", True), ("pathwise", True))
PAPER_B = {"ap": 1000, "sgd": 500}  # block / batch size at the full training size
SGD_GRID = (0.5, 1, 2, 5, 10, 20, 30, 50, 60, 70, 80, 90, 100)  # paper's grid from 5
BUDGETS = (10, 20, 50)  # epochs per step in the early-stopping study
TARGET_EPOCHS = {"cg": 2.0, "ap": 10.0}  # pathwise+warm vs standard-cold, epochs
TARGET_LLH = 0.02  # |test LLH − exact-training test LLH|
TOL = 0.01
CAP = 1000.0  # guard: at most this many epochs per step in table 1 (steps past it: unconv.)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Run:
    label: str
    config: TrainingConfig
    result: TrainingResult | None
    rmse: float
    llh: float
    note: str = ""

    @property
    def epochs(self) -> float:
        return self.result.total_epochs if self.result else math.nan

    @property
    def seconds(self) -> float:
        return self.result.total_seconds if self.result else math.nan

    @property
    def unconverged(self) -> int:
        return sum(not r.converged for r in self.result.log) if self.result else 0

    @property
    def skipped(self) -> int:
        """Steps whose update was skipped (unconverged with residual > max_step_residual)."""
        return sum(r.skipped for r in self.result.log) if self.result else 0


def variant_label(solver: str, estimator: str, warm: bool) -> str:
    return f"{solver}/{estimator}-{'warm' if warm else 'cold'}"


def load(name: str, n: int, seed: int):
    ds = pn.datasets.load_uci(name, 0)
    N = ds.X_train.shape[0]
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(N, generator=g)[: min(n, N)]
    return ds.X_train[idx], ds.y_train[idx], ds.X_test, ds.y_test, N


def tune_sgd_lr(X, y, batch_size: int, seed: int, cap: float | None) -> tuple[float, list[str]]:
    """Largest rate of SGD_GRID whose first-step solves (standard and pathwise
    right-hand sides, cold, to the tolerance) do not diverge.

    A solve that has not reached the tolerance within the per-step cap counts as
    divergent too: a rate at the edge of stability oscillates for the whole budget
    (measured: pol, n = 500, rate 2 needed ≈ 1000 epochs per solve, rate 1 ≈ 15) and
    one such step's gradient wrecks Adam's second-moment estimate for the rest of
    the run."""
    d = X.shape[1]
    kernel = Matern(nu=1.5, lengthscale=torch.ones(d, dtype=X.dtype), outputscale=1.0)
    noise = torch.tensor(1.0, dtype=X.dtype)  # the initial hyperparameters
    yc = y - y.mean()
    targets = []
    for est in ("standard", "pathwise"):
        e = make_estimator(TrainingConfig(estimator=est), torch.Generator().manual_seed(seed))
        targets.append(e.targets(kernel, X, noise, yc))
    trace = []
    for lr in sorted(SGD_GRID, reverse=True):
        solver = StochasticGradientDescent(tol=TOL, batch_size=batch_size, learning_rate=float(lr))
        try:
            epochs = 0.0
            for B in targets:
                _, info = solver.solve(
                    KernelSystem(kernel, X, noise),
                    B,
                    max_epochs=cap,
                    generator=torch.Generator().manual_seed(seed),
                )
                epochs += info.epochs
                if not info.converged:
                    raise ValueError(f"not converged within {cap:g} epochs")
        except ValueError as exc:
            trace.append(f"{lr:g}: " + ("diverged" if "diverged" in str(exc) else str(exc)))
            continue
        trace.append(f"{lr:g}: ok ({epochs:.0f} epochs for both solves)")
        return float(lr), trace
    raise RuntimeError(f"every SGD learning rate of {SGD_GRID} diverged")


def fit(X, y, Xs, ys, config: TrainingConfig, label: str, seed: int) -> Run:
    """Train, predict exactly, and restart SGD with half the rate if it diverges."""
    note = ""
    while True:
        t0 = time.perf_counter()
        try:
            result = train_hyperparameters(
                X, y, config, generator=torch.Generator().manual_seed(seed)
            )
        except ValueError as exc:
            if config.solver != "sgd" or "diverged" not in str(exc) or config.sgd_lr < 0.1:
                raise
            log(f"  {label}: SGD diverged at lr={config.sgd_lr:g}; restarting with half")
            config = replace(config, sgd_lr=config.sgd_lr / 2)
            note = f"lr halved to {config.sgd_lr:g}"
            continue
        break
    with torch.no_grad():
        mean, var = predictive(result, X, y, Xs, method="cholesky")
    run = Run(
        label,
        config,
        result,
        pn.metrics.rmse(mean, ys),
        pn.metrics.gaussian_log_likelihood(mean, var, ys),
        note,
    )
    probes = [r.residual_norm_probes for r in result.log]
    log(
        f"  {label:28s} epochs {run.epochs:8.1f}  train {run.seconds:7.1f}s "
        f"(wall {time.perf_counter() - t0:6.1f}s)  LLH {run.llh:+.4f}  noise {result.noise:.4g}  "
        f"unconv {run.unconverged}  skipped {run.skipped}  "
        f"probe res mean {statistics.mean(probes):.2e} final {probes[-1]:.2e}"
    )
    return run


def variant_config(
    base: TrainingConfig,
    solver: str,
    estimator: str,
    warm: bool,
    b: dict[str, int],
    lr: float | None,
    **changes,
) -> TrainingConfig:
    """``base`` for one solver/estimator/warm-start variant (AP block and SGD batch ``b``)."""
    return replace(
        base,
        solver=solver,
        estimator=estimator,
        warm_start=warm,
        block_size=b["ap"],
        batch_size=b["sgd"],
        sgd_lr=lr,
        **changes,
    )


def block_sizes(n: int, N: int) -> dict[str, int]:
    """AP block and SGD batch at ``n`` rows, keeping the paper's ratio ``b/N``."""
    return {s: max(1, round(PAPER_B[s] * n / N)) for s in PAPER_B}


def run_unit(name: str, unit: str, args, base: TrainingConfig) -> tuple[dict[str, Run], list[str]]:
    """:func:`compute_unit`, or its result saved by an earlier invocation (``--results``)."""
    path = None
    if args.results:
        tag = f"n{args.n}-steps{args.steps}-probes{args.probes}-cap{args.cap:g}-seed{args.seed}"
        path = Path(args.results) / f"{name}-{unit}-{tag}.pkl"
        if path.exists():
            log(f"[{name}] {unit}: reusing {path}")
            with path.open("rb") as fh:
                return pickle.load(fh)
    out = compute_unit(name, unit, args, base)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as fh:
            pickle.dump(out, fh)
    return out


def compute_unit(
    name: str, unit: str, args, base: TrainingConfig
) -> tuple[dict[str, Run], list[str]]:
    """One unit of table 1: the exact run of a data set, or one solver's four variants.

    Units are independent (same data, seeds and settings), so ``--jobs`` runs them in
    parallel processes, one torch thread each. Returns the runs by label and the
    output lines to print (the SGD learning-rate search).
    """
    torch.set_num_threads(1)
    X, y, Xs, ys, N = load(name, args.n, args.seed)
    b = block_sizes(X.shape[0], N)
    runs: dict[str, Run] = {}
    lines: list[str] = []
    if unit == "exact":
        log(
            f"[{name}] n = {X.shape[0]} of {N}, d = {X.shape[1]}, test {Xs.shape[0]}; "
            f"AP b = {b['ap']}, SGD b = {b['sgd']}"
        )
        cfg = replace(base, solver="cholesky", estimator="exact", warm_start=False)
        runs["exact"] = fit(X, y, Xs, ys, cfg, f"{name} exact", args.seed)
        return runs, lines
    lr = None
    if unit == "sgd":
        lr, trace = tune_sgd_lr(X, y, b["sgd"], args.seed, base.epochs_budget)
        lines.append(
            f"[{name}] SGD learning-rate search (batch {b['sgd']}, descending): " + "; ".join(trace)
        )
        lines.append(f"[{name}] chosen SGD learning rate: {lr:g}")
    for est, warm in VARIANTS:
        cfg = variant_config(base, unit, est, warm, b, lr)
        label = variant_label(unit, est, warm)
        runs[label] = fit(X, y, Xs, ys, cfg, f"{name} {label}", args.seed)
    return runs, lines


#: Expected cost rank of a unit (SGD's standard-cold runs are the slowest on a CPU).
_COST_ORDER = {"sgd": 0, "ap": 1, "cg": 2, "exact": 3}
#: Options that do not change a run (its key names the data set, unit or variant).
IGNORED = ("jobs", "figures", "results", "datasets", "solvers", "es_dataset", "budgets",
           "no_early_stopping", "no_baseline")  # fmt: skip


def in_pool(fn, tasks: list[tuple], jobs: int) -> list:
    """``[fn(*t) for t in tasks]``, in ``jobs`` spawned processes when ``jobs > 1``."""
    if jobs <= 1:
        return [fn(*t) for t in tasks]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        return [f.result() for f in [pool.submit(fn, *t) for t in tasks]]


def in_pool_saved(store: ResultStore | None, keys: list[str], fn, tasks: list[tuple], jobs: int):
    """:func:`in_pool`, each finished task saved in ``store`` under its key (as it ends).

    Tasks saved by an earlier invocation are loaded, not rerun.
    """
    if store is None:
        return in_pool(fn, tasks, jobs)
    todo = [i for i, key in enumerate(keys) if key not in store]
    store.loaded += len(keys) - len(todo)
    out = {}
    if jobs <= 1:
        for i in todo:
            out[i] = store.unit(keys[i], lambda i=i: fn(*tasks[i]))
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = {pool.submit(fn, *tasks[i]): i for i in todo}
            for f in as_completed(futures):
                out[futures[f]] = f.result()
                store.put(keys[futures[f]], out[futures[f]])
                store.computed += 1
    return [out[i] if i in out else store.get(key) for i, key in enumerate(keys)]


def run_units(args, base: TrainingConfig, store: ResultStore | None) -> dict[str, dict[str, Run]]:
    """Every unit of table 1 (``--jobs`` processes), runs grouped by data set."""
    units = [(d, u) for d in args.datasets for u in ("exact", *args.solvers)]
    # the costliest units first, so that parallel workers finish together
    units.sort(key=lambda unit: _COST_ORDER[unit[1]])
    keys = [ResultStore.key("table1", d, u) for d, u in units]
    done = in_pool_saved(store, keys, run_unit, [(d, u, args, base) for d, u in units], args.jobs)
    out: dict[str, dict[str, Run]] = {d: {} for d in args.datasets}
    lines: dict[str, list[str]] = {d: [] for d in args.datasets}
    for (d, _), (runs, text) in zip(units, done):
        out[d].update(runs)
        lines[d].extend(text)
    for d in args.datasets:
        table1(d, args, base, out[d], lines[d])
    return out


def table1(name: str, args, base: TrainingConfig, runs: dict[str, Run], lines: list[str]) -> None:
    """Print table 1 of one data set from its runs."""
    _, _, Xs, _, N = load(name, args.n, args.seed)
    n = min(args.n, N)
    b = block_sizes(n, N)
    print()
    for line in lines:
        print(line)
    lr = (
        runs[variant_label("sgd", "standard", False)].config.sgd_lr
        if "sgd" in args.solvers
        else None
    )
    ref = runs["exact"]
    rows = [
        [
            "exact (Cholesky)",
            "—",
            "—",
            f"{ref.rmse:.4f}",
            f"{ref.llh:+.4f}",
            "—",
            "—",
            f"{ref.seconds:.1f}",
            "—",
            "—",
            "—",
            "—",
            "",
        ]
    ]
    for solver in args.solvers:
        base_run = runs[variant_label(solver, "standard", False)]
        for est, warm in VARIANTS:
            r = runs[variant_label(solver, est, warm)]
            rows.append(
                [
                    solver.upper(),
                    "yes" if est == "pathwise" else "no",
                    "yes" if warm else "no",
                    f"{r.rmse:.4f}",
                    f"{r.llh:+.4f}",
                    f"{r.llh - ref.llh:+.4f}",
                    f"{r.epochs:.0f}",
                    f"{r.seconds:.1f}",
                    f"{ratio(base_run.epochs, r.epochs):.2f}×",
                    f"{ratio(base_run.seconds, r.seconds):.2f}×",
                    str(r.unconverged),
                    str(r.skipped),
                    r.note,
                ]
            )
    print_table(
        f"Table 1, {name}: n = {n} (of {N}) train / {Xs.shape[0]} test, {args.steps} Adam steps, "
        f"tol {TOL}, {base.num_probes} probes; AP block {b['ap']}, SGD batch {b['sgd']}"
        + (f" lr {lr:g}" if lr is not None else ""),
        [
            "solver",
            "pathwise",
            "warm",
            "test RMSE",
            "test LLH",
            "ΔLLH vs exact",
            "epochs",
            "time (s)",
            "speed-up (epochs)",
            "speed-up (time)",
            "unconv. steps",
            "skipped",
            "note",
        ],
        rows,
    )


def speedups(runs: dict[str, Run], solver: str, est: str, warm: bool) -> tuple[float, float]:
    base_run = runs[variant_label(solver, "standard", False)]
    r = runs[variant_label(solver, est, warm)]
    return ratio(base_run.epochs, r.epochs), ratio(base_run.seconds, r.seconds)


def summary(all_runs: dict[str, dict[str, Run]], solvers: tuple[str, ...]) -> None:
    names = list(all_runs)
    rows = []
    for solver in solvers:
        for est, warm in VARIANTS[1:]:
            ep = [speedups(all_runs[d], solver, est, warm)[0] for d in names]
            tm = [speedups(all_runs[d], solver, est, warm)[1] for d in names]
            rows.append(
                [
                    solver.upper(),
                    "yes" if est == "pathwise" else "no",
                    "yes" if warm else "no",
                    *[f"{e:.2f}×" for e in ep],
                    f"{statistics.mean(ep):.2f}×",
                    f"{statistics.mean(tm):.2f}×",
                ]
            )
    print_table(
        f"Average speed-up over standard-cold of the same solver ({', '.join(names)}; "
        "arithmetic mean of the per-data-set ratios)",
        [
            "solver",
            "pathwise",
            "warm",
            *[f"epochs {d}" for d in names],
            "mean (epochs)",
            "mean (time)",
        ],
        rows,
    )
    print("\n== Targets ==")
    for solver, target in TARGET_EPOCHS.items():
        if solver not in solvers:
            continue
        ep = [speedups(all_runs[d], solver, "pathwise", True)[0] for d in names]
        per = ", ".join(f"{d} {e:.2f}×" for d, e in zip(names, ep))
        mean = statistics.mean(ep)
        ok_all = all(e >= target for e in ep)
        print(
            f"{solver.upper()} pathwise+warm vs standard-cold epochs ≥ {target:g}×: {per}; "
            f"mean {mean:.2f}× -> {'MET' if mean >= target else 'NOT MET'} on average, "
            f"{'met' if ok_all else 'NOT met'} on every data set"
        )
    worst = max(
        (abs(r.llh - runs["exact"].llh), d, lab)
        for d, runs in all_runs.items()
        for lab, r in runs.items()
        if lab != "exact"
    )
    print(
        f"test LLH within {TARGET_LLH} of exact-gradient training (all runs): worst "
        f"|ΔLLH| = {worst[0]:.4f} ({worst[1]}, {worst[2]}) -> "
        f"{'MET' if worst[0] <= TARGET_LLH else 'NOT MET'}"
    )


def es_unit(name: str, key: tuple[str, str, bool, str], lr, args, base: TrainingConfig) -> Run:
    """One early-stopping run: ``key = (solver, estimator, warm, budget)``."""
    torch.set_num_threads(1)
    solver, est, warm, budget = key
    X, y, Xs, ys, N = load(name, args.n, args.seed)
    # the paper's loop applies every gradient, also after a solve that ends with a relative
    # residual above 1 (the library's default guard would skip such steps; measured: CG
    # standard-cold at 10 epochs per step then skips half the steps of pol at n = 1000)
    cfg = variant_config(
        base,
        solver,
        est,
        warm,
        block_sizes(X.shape[0], N),
        lr,
        epochs_budget=float(budget),
        max_step_residual=None,
    )
    return fit(X, y, Xs, ys, cfg, f"{name} {variant_label(solver, est, warm)} ≤{budget}", args.seed)


def early_stopping(
    args, base: TrainingConfig, table_runs: dict[str, Run] | None, store: ResultStore | None
) -> dict:
    name = args.es_dataset
    X, y, _, _, N = load(name, args.n, args.seed)
    n = X.shape[0]
    b = block_sizes(n, N)
    sgd = None if table_runs is None else table_runs.get(variant_label("sgd", "standard", False))
    if sgd is not None:
        lr = sgd.config.sgd_lr
    elif "sgd" not in args.solvers:
        lr = None
    else:
        lr, _ = tune_sgd_lr(X, y, b["sgd"], args.seed, base.epochs_budget)
    log(f"[early stopping, {name}] n = {n}, budgets {args.budgets}, SGD lr {lr}")
    variants = [("pathwise", True), ("pathwise", False)]
    if not args.no_baseline:
        variants.append(("standard", False))
    keys = [
        (solver, est, warm, str(budget))
        for solver in args.solvers
        for budget in args.budgets
        for est, warm in variants
    ]
    # the costliest (SGD, AP, large budgets) first, so that parallel workers finish together
    order = sorted(keys, key=lambda k: (_COST_ORDER[k[0]], -float(k[3])))
    keys = [ResultStore.key("early-stopping", name, *k, lr) for k in order]
    tasks = [(name, k, lr, args, base) for k in order]
    done = dict(zip(order, in_pool_saved(store, keys, es_unit, tasks, args.jobs)))
    out: dict[tuple[str, str, bool, str], Run] = {}
    for solver in args.solvers:
        for key in keys:
            if key[0] == solver:
                out[key] = done[key]
        if table_runs is not None:
            for est, warm in variants:
                out[(solver, est, warm, "tol")] = table_runs[variant_label(solver, est, warm)]
    rows = []
    for (solver, est, warm, budget), r in out.items():
        probes = [s.residual_norm_probes for s in r.result.log]
        rows.append(
            [
                solver.upper(),
                budget,
                est,
                "yes" if warm else "no",
                f"{statistics.mean(probes):.2e}",
                f"{probes[-1]:.2e}",
                f"{r.result.log[-1].residual_norm_mean:.2e}",
                f"{r.epochs:.0f}",
                str(r.unconverged),
                str(r.skipped),
                f"{r.llh:+.4f}",
                r.note,
            ]
        )
    rows.sort(key=lambda row: (SOLVERS.index(row[0].lower()), _budget_key(row[1]), row[2], row[3]))
    print_table(
        f"Early stopping on {name} (n = {n}, {args.steps} steps): epoch budget per step, "
        f"relative residual norms of the probe systems (tol = solve to {TOL}, from table 1)",
        [
            "solver",
            "budget",
            "estimator",
            "warm",
            "probe res. (mean over steps)",
            "probe res. (final)",
            "mean-system res. (final)",
            "epochs",
            "unconv. steps",
            "skipped",
            "test LLH",
            "note",
        ],
        rows,
    )
    return out


def _budget_key(budget: str) -> float:
    return math.inf if budget == "tol" else float(budget)


def plot_early_stopping(out: dict, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = sorted({k[3] for k in out}, key=_budget_key)
    solvers = [s for s in SOLVERS if any(k[0] == s for k in out)]
    style = {("pathwise", True): "-", ("pathwise", False): "--", ("standard", False): ":"}
    fig, axes = plt.subplots(
        1, len(solvers), figsize=(4.4 * len(solvers), 4.2), sharey=True, dpi=120, squeeze=False
    )
    axes = axes[0]
    for ax, solver in zip(axes, solvers):
        for (s, est, warm, budget), r in out.items():
            if s != solver:
                continue
            c = f"C{budgets.index(budget)}"
            steps = [rec.step for rec in r.result.log]
            res = [rec.residual_norm_probes for rec in r.result.log]
            lab = f"{budget} ep" if budget != "tol" else "to tol"
            ax.semilogy(
                steps,
                res,
                color=c,
                ls=style[(est, warm)],
                lw=1.2,
                label=lab if (est, warm) == ("pathwise", True) else None,
            )
        ax.axhline(TOL, color="0.5", lw=0.8, ls=":")
        ax.set_title(solver.upper())
        ax.set_xlabel("Adam step")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("probe relative residual norm")
    axes[0].legend(fontsize=8, title="budget per step", title_fontsize=8)
    axes[-1].text(
        0.98,
        0.02,
        "solid: pathwise warm\ndashed: pathwise cold\ndotted: standard cold",
        transform=axes[-1].transAxes,
        ha="right",
        va="bottom",
        fontsize=8,
    )
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (< 2 min)")
    parser.add_argument(
        "--datasets", nargs="+", default=None, help="table-1 data sets (default pol elevators bike)"
    )
    parser.add_argument("--n", type=int, default=None, help="training rows (default 1000)")
    parser.add_argument("--steps", type=int, default=None, help="Adam steps (default 100)")
    parser.add_argument("--es-dataset", default="pol", help="early-stopping data set")
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--no-early-stopping", action="store_true")
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="early stopping without the standard-cold baseline",
    )
    parser.add_argument(
        "--solvers", nargs="+", default=list(SOLVERS), choices=SOLVERS, help="iterative solvers"
    )
    parser.add_argument("--probes", type=int, default=64)
    parser.add_argument(
        "--cap",
        type=float,
        default=CAP,
        help=f"epoch cap per step of the table-1 runs (default {CAP:g}; 0: none)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--results",
        default=None,
        help="folder for the table-1 units' results: a unit already saved there by an "
        "earlier invocation with the same --n/--steps/--probes/--cap/--seed is reused, "
        "not rerun (e.g. to add --solvers sgd to a cg/ap run); results of older code "
        "are NOT detected: clear the folder after changing the library",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="table-1 units (a data set's exact run, or one solver's four variants) and "
        "early-stopping runs go to this many processes, one torch thread each (default: "
        "2, or 1 on a one-core machine)",
    )
    parser.add_argument(
        "--figures",
        default=None,
        help="figure folder (default docs/img, outputs/bench_training with --quick)",
    )
    add_resume_arguments(parser)
    args = parser.parse_args(argv)
    args.solvers = tuple(s for s in SOLVERS if s in args.solvers)
    if args.quick:
        args.datasets = args.datasets or ["pol", "elevators"]
        args.n = args.n or 200
        args.steps = args.steps or 4
        args.probes = min(args.probes, 16)
        args.budgets = [5, 10]
    args.datasets = args.datasets or ["pol", "elevators", "bike"]
    args.n = args.n or 1000
    args.steps = args.steps or 100
    fig_dir = (
        Path(args.figures)
        if args.figures
        else (ROOT / ("outputs/bench_training" if args.quick else "docs/img"))
    )
    torch.set_num_threads(1)
    t_start = time.perf_counter()
    base = TrainingConfig(
        steps=args.steps,
        epochs_budget=args.cap or None,
        lr=0.1,
        tol=TOL,
        num_probes=args.probes,
        num_features=2000,
        preconditioner_rank=100,
        momentum=0.9,
        init="constant",
        init_value=1.0,
    )
    print(
        f"bench_training: n = {args.n}, steps = {args.steps}, probes = {args.probes}, "
        f"datasets {args.datasets}, float64, torch threads 1"
    )
    # without --results, each finished run is saved in the study's results file (--fresh)
    store = None if args.results else ResultStore.from_args(__file__, args, ignore=IGNORED)
    all_runs = run_units(args, base, store)
    summary(all_runs, args.solvers)
    curves = args.es_dataset if args.es_dataset in all_runs else args.datasets[0]
    keep = ["exact"] + [
        variant_label(s, e, w)
        for s in args.solvers
        for e, w in (("standard", False), ("pathwise", True))
    ]
    path = pn.plotting.plot_training(
        {k: all_runs[curves][k].result.log for k in keep},
        fig_dir / "training_curves.png",
        title=f"Hyperparameter training on {curves} (n = {args.n}): standard-cold vs pathwise-warm",
        tol=TOL,
    )
    print(f"\nwrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if not args.no_early_stopping:
        out = early_stopping(args, base, all_runs.get(args.es_dataset), store)
        path = plot_early_stopping(
            out,
            fig_dir / "training_early_stopping.png",
            f"Probe residual norms per step on {args.es_dataset} (n = {args.n}), "
            "epoch budget per step",
        )
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s")
    if store is not None:
        print(store.summary(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
