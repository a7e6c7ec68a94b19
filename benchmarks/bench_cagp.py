"""Wenger et al. (NeurIPS 2024) at CPU scale: CaGP against SVGP, SGPR, the exact GP and IterGP.

"Computation-Aware Gaussian Processes: Model Selection and Linear-Time Inference". Four
parts (``--parts``):

(a) ``uci``: on UCI sets (standard splits, standardised on the training split by
    ``load_uci``; the training rows randomly subsampled to ``--max-train``, the test rows
    to ``--max-test``), with an ARD RBF kernel started at lengthscales 1, outputscale 1
    and noise 0.1 for every model except IterGP:

    * CaGP: ``--actions`` learned block-sparse actions (``blocks="random"``), ``--steps``
      Adam steps at ``--lr`` on the ELBO, every other setting at its default. The rate
      is 0.1, not the model's default 0.05: on 2 000 rows of elevators, pol and
      keggdirected, 200 steps at 0.1 reached a higher ELBO and a lower test RMSE than 300
      steps at 0.05 (e.g. pol: RMSE 0.206 against 0.211);
    * SVGP (gpytorch 1.15): ``--inducing`` learned inducing points, Adam 0.01, minibatches
      of ``--batch``, trained for CaGP's wall time on the split. The default 256 (CaGP's
      ``i``): in equal time a step with 512 costs about four times as much, and on 1 000
      rows of elevators with 35 s, 512 points reached RMSE 0.53, 256 0.48, 128 0.42;
    * SGPR (gpytorch ``InducingPointKernel``, Titsias' bound): as many learned inducing
      points as CaGP has actions, full-batch Adam at ``--lr``, CaGP's wall time;
    * the exact GP: ``fit_exact_hyperparameters`` (150 Adam steps, each a Cholesky and its
      backward, seconds per step at ``n`` = 1 000 on one thread) on ``min(n,
      --exact-fit)`` random training rows, then ``ExactGP`` conditioned on all ``n``;
    * IterGP-CG: hyperparameters by ``train_hyperparameters`` (CG, pathwise estimator,
      warm starts; Lin et al. 2024: ``--iter-steps`` Adam steps at 0.1 from θ = 1, noise
      included; it trains a Matérn-3/2 ARD kernel, the only one it supports), then
      ``IterGP(kernel, noise, CG(), ResidualNorm(0.01) | MaxIterations(actions))``.

    Reported per set and model: test RMSE and NLL (mean negative log predictive density
    of the standardised ``y``; latent variance plus the noise), mean ± sd over the
    splits, and the training wall time; the model with the best mean NLL per set, and
    whether CaGP's RMSE is within 5 % of the better of CaGP's and SVGP's. Equal wall
    time on a shared machine is only as equal as the load during the two runs.

(b) ``cost``: one CaGP training step (ELBO value, backward and Adam update, as
    ``m.training.history`` times it; ``backend="chunked"``) over one differentiable
    kernel pass (forward and backward of ``(K @ S).sum()``, ``K`` chunked, ``S`` dense
    ``(n, i)``, gradients to the kernel's parameters) and over one forward pass under
    ``no_grad``; synthetic ``d = 8`` data, ``n`` = 2 000, 5 000, 10 000, ``i`` = 64, 256,
    interleaved, medians of ``--repeats``. CaGP's own ``K S`` pass exploits the block
    sparsity (``pnsolve.gp.cagp.products``: a tile costs ``O(rows · cols)``, not
    ``O(rows · cols · i)``), so a whole step can cost less than the dense pass.

(c) ``predict``: seconds per test point of ``m.posterior(Xs)`` (mean and variance, 1 000
    test points) at ``n`` = 10³, 10⁴, 10⁵, ``i = 64``, ``d = 8`` (``fit(steps=0)``: one
    ``K S`` pass to factorise, not timed), and the time per point over ``n d``: flat if
    the cost is linear in ``n``.

(d) ``figure``: the paper's Fig. 1 idea on 1-d data with a gap (300 points on
    [0, 1] ∪ [2, 3], ``y = sin(a x) + 0.1 ε`` for ``a`` = 3, 8, 12): CaGP (16 actions,
    random and k-means blocks) against SVGP (16 inducing points) and the exact GP, all
    trained from lengthscale 1 and noise 0.1; posterior mean ± 2 sd of ``f`` in
    ``outputs/benchmarks/cagp_gap.png`` and a table of the learned noise and the mean
    posterior sd in the gap and on the data. ``sin 3x`` is easy for 16 of either; the
    faster functions show where they differ.

Usage: ``python benchmarks/bench_cagp.py [--datasets elevators pol bike protein
keggdirected] [--splits 3] [--max-train 1500] [--actions 256] [--steps 200]
[--parts uci,cost,predict,figure] [--quick]``. One torch thread. The default run took
32 minutes on a shared 2-core machine (part (a) 28: 1 500 rows are what fits five sets
× three splits × five models in that time; (b) 2, (c) 1, (d) 1); ``--quick`` (one set,
one split, 400 rows, small cost and prediction tables, two gap functions) about one
minute: a smoke run whose numbers are not the comparison.
"""

from __future__ import annotations

import argparse
import copy
import gc
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ResultStore, add_resume_arguments, load_average, print_table

import pnsolve as pn

F64 = torch.float64
SETS = ["elevators", "pol", "bike", "protein", "keggdirected"]
PARTS = ("uci", "cost", "predict", "figure")
NOISE0 = 0.1  # every model's initial noise variance
FIGURE = Path(__file__).resolve().parents[1] / "outputs" / "benchmarks" / "cagp_gap.png"


# ----------------------------------------------------------------------------- helpers
def scores(mean: torch.Tensor, var: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Test RMSE and mean negative log predictive density (``var`` includes the noise)."""
    rmse = float((mean - y).square().mean().sqrt())
    nll = float((0.5 * torch.log(2 * math.pi * var) + 0.5 * (y - mean) ** 2 / var).mean())
    return rmse, nll


def mean_sd(values: list[float], digits: int = 3) -> str:
    if not values:
        return "—"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.{digits}f} ± {sd:.{digits}f}"


def rbf(d: int) -> pn.kernels.RBF:
    return pn.kernels.RBF(lengthscale=torch.ones(d, dtype=F64), outputscale=1.0)


def split_data(name: str, split: int, max_train: int, max_test: int):
    """Training and test rows of a standard split (standardised on the whole training
    split by ``load_uci``), randomly subsampled to at most ``max_train`` / ``max_test``."""
    ds = pn.datasets.load_uci(name, split=split)
    g = torch.Generator().manual_seed(1000 + split)
    tr = torch.randperm(ds.X_train.shape[0], generator=g)[:max_train]
    te = torch.randperm(ds.X_test.shape[0], generator=g)[:max_test]
    return (
        ds.X_train[tr].to(F64),
        ds.y_train[tr].to(F64),
        ds.X_test[te].to(F64),
        ds.y_test[te].to(F64),
    )


# ----------------------------------------------------------------------------- models
def run_cagp(X, y, Xs, ys, *, actions: int, steps: int, lr: float | None, seed: int) -> dict:
    m = pn.gp.CaGP(rbf(X.shape[1]), NOISE0, min(actions, X.shape[0]))
    rate = {} if lr is None else {"lr": lr}  # None: the model's defaults
    t0 = time.perf_counter()
    m.fit(X, y, steps=steps, generator=torch.Generator().manual_seed(seed), **rate)
    seconds = time.perf_counter() - t0
    post = m.posterior(Xs)
    elbo = [h["elbo"] for h in m.training.history]
    return {
        "scores": scores(post.mean, post.var + m.noise, ys),
        "seconds": seconds,
        "elbo_per_n": m.elbo(X, y) / X.shape[0],
        "elbo_rose": len(elbo) < 2 or elbo[-1] > elbo[0],
        "noise": m.noise,
    }


def _gpytorch_rbf(d: int):
    import gpytorch

    k = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=d)).to(F64)
    k.base_kernel.lengthscale = torch.ones(1, d, dtype=F64)
    k.outputscale = torch.tensor(1.0, dtype=F64)
    return k


def _likelihood():
    import gpytorch

    lik = gpytorch.likelihoods.GaussianLikelihood().to(F64)
    lik.noise = torch.tensor(NOISE0, dtype=F64)
    return lik


def svgp_model(X: torch.Tensor, num_inducing: int, seed: int):
    """gpytorch SVGP: zero mean, ARD RBF, inducing points at random training rows."""
    import gpytorch

    torch.manual_seed(seed)  # gpytorch initialises its variational mean from the global RNG
    idx = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(seed))
    Z = X[idx[:num_inducing]].clone()

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self) -> None:
            dist = gpytorch.variational.CholeskyVariationalDistribution(Z.shape[0])
            strat = gpytorch.variational.VariationalStrategy(
                self, Z, dist, learn_inducing_locations=True
            )
            super().__init__(strat)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = _gpytorch_rbf(X.shape[1])

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(
                self.mean_module(x), self.covar_module(x)
            )

    return SVGP().to(F64), _likelihood()


def train_svgp(
    model, lik, X, y, *, budget: float, batch: int, seed: int, lr: float = 0.01,
    max_steps: float = math.inf,
) -> int:  # fmt: skip
    """Adam on the minibatch ELBO for ``budget`` seconds or ``max_steps``; returns the steps."""
    import gpytorch

    model.train(), lik.train()
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=X.shape[0])
    opt = torch.optim.Adam([*model.parameters(), *lik.parameters()], lr=lr)
    g = torch.Generator().manual_seed(seed + 1)
    batch = min(batch, X.shape[0])
    t0, steps = time.perf_counter(), 0
    while time.perf_counter() - t0 < budget and steps < max_steps:
        if batch < X.shape[0]:
            idx = torch.randint(0, X.shape[0], (batch,), generator=g)
            xb, yb = X[idx], y[idx]
        else:
            xb, yb = X, y
        opt.zero_grad()
        (-mll(model(xb), yb)).backward()
        opt.step()
        steps += 1
    model.eval(), lik.eval()
    return steps


def latent(model, lik, Xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Latent mean and variance of a gpytorch model at ``Xs``, and its noise."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = model(Xs)
        return f.mean, f.variance, float(lik.noise)


def run_svgp(X, y, Xs, ys, *, budget: float, num_inducing: int, batch: int, seed: int) -> dict:
    model, lik = svgp_model(X, min(num_inducing, X.shape[0]), seed)
    t0 = time.perf_counter()
    steps = train_svgp(model, lik, X, y, budget=budget, batch=batch, seed=seed)
    seconds = time.perf_counter() - t0
    mean, var, noise = latent(model, lik, Xs)
    return {"scores": scores(mean, var + noise, ys), "seconds": seconds, "steps": steps}


def run_sgpr(X, y, Xs, ys, *, budget: float, num_inducing: int, lr: float, seed: int) -> dict:
    """gpytorch SGPR (``ExactGP`` with an ``InducingPointKernel``), full-batch Adam."""
    import gpytorch

    idx = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(seed))
    Z = X[idx[: min(num_inducing, X.shape[0])]].clone()
    lik = _likelihood()

    class SGPR(gpytorch.models.ExactGP):
        def __init__(self) -> None:
            super().__init__(X, y, lik)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.InducingPointKernel(
                _gpytorch_rbf(X.shape[1]), inducing_points=Z, likelihood=lik
            )

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(
                self.mean_module(x), self.covar_module(x)
            )

    model = SGPR().to(F64)
    model.train(), lik.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    opt = torch.optim.Adam(model.parameters(), lr=lr)  # the likelihood is a submodule
    t0, steps = time.perf_counter(), 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while time.perf_counter() - t0 < budget:
            opt.zero_grad()
            (-mll(model(X), y)).backward()
            opt.step()
            steps += 1
    seconds = time.perf_counter() - t0
    model.eval(), lik.eval()
    mean, var, noise = latent(model, lik, Xs)
    return {"scores": scores(mean, var + noise, ys), "seconds": seconds, "steps": steps}


def run_exact(X, y, Xs, ys, *, fit_rows: int, seed: int) -> dict:
    kernel = rbf(X.shape[1])
    idx = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(seed))[:fit_rows]
    t0 = time.perf_counter()
    fit = pn.gp.fit_exact_hyperparameters(kernel, X[idx], y[idx], noise=NOISE0, steps=150)
    gp = pn.gp.ExactGP(kernel, float(fit.noise)).fit(X, y)
    seconds = time.perf_counter() - t0
    post = gp.posterior(Xs)
    return {"scores": scores(post.mean, post.var + float(fit.noise), ys), "seconds": seconds}


def run_itergp(X, y, Xs, ys, *, steps: int, max_iter: int, seed: int) -> dict:
    from pnsolve.gp.training import TrainingConfig, train_hyperparameters

    config = TrainingConfig(solver="cg", estimator="pathwise", warm_start=True, steps=steps,
                            lr=0.1, tol=0.01)  # fmt: skip
    t0 = time.perf_counter()
    result = train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(seed))
    stopping = pn.stopping.ResidualNorm(rtol=0.01) | pn.stopping.MaxIterations(max_iter)
    gp = pn.gp.IterGP(result.kernel, result.noise, pn.policies.CG(), stopping, mean=result.mean)
    gp.fit(X, y)
    seconds = time.perf_counter() - t0
    post = gp.posterior(Xs)
    return {"scores": scores(post.mean, post.var + result.noise, ys), "seconds": seconds,
            "iterations": gp.info.iterations}  # fmt: skip


# ----------------------------------------------------------------------------- (a)
MODELS = ("cagp", "svgp", "sgpr", "exact", "itergp")


def run_model(args, key: str, X, y, Xs, ys, *, budget: float, seed: int) -> dict | str:
    """One model on one split: its result dictionary, or the error message of a failure."""
    try:
        if key == "cagp":
            return run_cagp(X, y, Xs, ys, actions=args.actions, steps=args.steps, lr=args.lr,
                            seed=seed)  # fmt: skip
        if key == "svgp":
            return run_svgp(X, y, Xs, ys, budget=budget, num_inducing=args.inducing,
                            batch=args.batch, seed=seed)  # fmt: skip
        if key == "sgpr":
            return run_sgpr(X, y, Xs, ys, budget=budget, num_inducing=args.actions,
                            lr=args.sgpr_lr, seed=seed)  # fmt: skip
        if key == "exact":
            return run_exact(X, y, Xs, ys, fit_rows=args.exact_fit, seed=seed)
        return run_itergp(X, y, Xs, ys, steps=args.iter_steps,
                          max_iter=min(args.actions, X.shape[0]), seed=seed)  # fmt: skip
    except Exception as exc:  # a failure is a finding: reported, and saved like a result
        return f"{type(exc).__name__}: {exc}"


def run_split(args, name: str, split: int, labels: dict[str, str]) -> dict[str, dict | str]:
    """Every model on one split: a result dictionary, or the error message of a failure."""
    X, y, Xs, ys = split_data(name, split, args.max_train, args.max_test)
    n, d = X.shape
    seed = 17 * split + 1
    out: dict[str, dict | str] = {}
    budget = args.fallback_budget  # SVGP's and SGPR's seconds if CaGP fails
    for key in args.models:
        r = args.store.unit(args.store.key("uci", name, split, key), run_model,
                            args, key, X, y, Xs, ys, budget=budget, seed=seed)  # fmt: skip
        if isinstance(r, str):  # report and go on: a failure is a finding
            out[key] = r
            print(f"{name} split {split} {labels[key]}: FAILED {out[key]}", flush=True)
            continue
        if key == "cagp":
            budget = r["seconds"]
        out[key] = r
        extra = " ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in r.items()
            if k not in ("scores", "seconds")
        )
        print(f"{name} (n={n}, d={d}) split {split} {labels[key]}: RMSE {r['scores'][0]:.4f} "
              f"NLL {r['scores'][1]:.4f} {r['seconds']:.1f} s {extra}", flush=True)  # fmt: skip
    return out


def part_uci(args) -> None:
    labels = {
        "cagp": f"CaGP (i={args.actions})",
        "svgp": f"SVGP ({args.inducing} ind.)",
        "sgpr": f"SGPR ({args.actions} ind.)",
        "exact": f"exact GP (θ on {args.exact_fit})",
        "itergp": "IterGP-CG (Matérn-3/2)",
    }
    rows, verdicts = [], []
    for name in args.datasets:
        res: dict[str, list[dict]] = {key: [] for key in args.models}
        failures: dict[str, str] = {}
        for split in range(args.first_split, args.first_split + args.splits):
            for key, r in run_split(args, name, split, labels).items():
                if isinstance(r, str):
                    failures[key] = r
                else:
                    res[key].append(r)
        mean_nll = {}
        for key in args.models:
            runs = res[key]
            if not runs:
                rows.append([name, labels[key], "—", "—", "—", failures.get(key, "")[:60]])
                continue
            rm = [r["scores"][0] for r in runs]
            nl = [r["scores"][1] for r in runs]
            mean_nll[labels[key]] = statistics.mean(nl)
            secs = statistics.mean(r["seconds"] for r in runs)
            note = "" if len(runs) == args.splits else f"{len(runs)}/{args.splits} splits"
            rows.append([name, labels[key], mean_sd(rm), mean_sd(nl), f"{secs:.1f}", note])
        if mean_nll:
            winner = min(mean_nll, key=mean_nll.__getitem__)
            verdict = f"{name}: best mean NLL {winner} ({mean_nll[winner]:.3f})"
            if res.get("cagp") and res.get("svgp"):
                c = statistics.mean(r["scores"][0] for r in res["cagp"])
                s = statistics.mean(r["scores"][0] for r in res["svgp"])
                within = c <= 1.05 * min(c, s)
                verdict += (f"; CaGP RMSE {c:.3f} vs SVGP {s:.3f}: within 5 % of the better: "
                            f"{'yes' if within else 'NO'}")  # fmt: skip
            verdicts.append(verdict)
    rate = "the default rates" if args.lr is None else f"lr {args.lr}"
    print_table(
        f"(a) UCI, ≤ {args.max_train} training / ≤ {args.max_test} test rows, {args.splits} "
        f"split(s); CaGP {args.steps} Adam steps at {rate}; SVGP and SGPR get CaGP's "
        "wall time",
        ["data", "model", "test RMSE (mean ± sd)", "test NLL (mean ± sd)", "train s", "note"],
        rows,
    )
    print()
    for v in verdicts:
        print(v)


# ----------------------------------------------------------------------------- (b)
def synthetic(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(3 * X).sum(1) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y


def cost_row(n: int, i: int, d: int, repeats: int) -> list:
    """Medians of a CaGP step, a differentiable ``K S`` pass and a forward one (seconds)."""
    X, y = synthetic(n, d, seed=n)
    kernel = pn.kernels.RBF(lengthscale=torch.full((d,), 0.5, dtype=F64))
    m = pn.gp.CaGP(kernel, NOISE0, i, backend="chunked")
    gen = torch.Generator().manual_seed(0)
    m.fit(X, y, steps=1, generator=gen)
    k2 = copy.deepcopy(kernel)
    for p in k2.parameters():
        p.requires_grad_(True)
    S = torch.randn(n, i, generator=torch.Generator().manual_seed(1), dtype=F64)

    def step() -> float:  # the training step as the run's history times it
        m.fit(X, y, steps=m.training.steps_done + 1, generator=gen)
        return m.training.history[-1]["seconds"]

    def forward_backward() -> float:
        t0 = time.perf_counter()
        (k2.linop(X, backend="chunked") @ S).sum().backward()
        return time.perf_counter() - t0

    def forward() -> float:
        t0 = time.perf_counter()
        with torch.no_grad():
            k2.linop(X, backend="chunked") @ S
        return time.perf_counter() - t0

    fns = {"step": step, "fb": forward_backward, "f": forward}
    samples: dict[str, list[float]] = {key: [] for key in fns}
    for r in range(repeats + 1):  # round 0 warms up
        for key, fn in fns.items():
            gc.collect()
            t = fn()
            if r:
                samples[key].append(t)
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"cost n={n} i={i}: step {med['step']:.3f} s, pass fwd+bwd {med['fb']:.3f} s, "
          f"fwd {med['f']:.3f} s", flush=True)  # fmt: skip
    return [n, i, med["step"], med["fb"], med["f"], med["step"] / med["fb"], med["step"] / med["f"]]


def part_cost(args) -> None:
    d = 8
    rows = [
        args.store.unit(args.store.key("cost", n, i), cost_row, n, i, d, args.repeats)
        for n in args.cost_n
        for i in (64, 256)
    ]
    print_table(
        f"(b) one CaGP training step in kernel passes (d = {d}, backend chunked, medians of "
        f"{args.repeats}, interleaved; {load_average()})",
        ["n", "i", "step s", "KS fwd+bwd s", "KS fwd s", "step / (fwd+bwd)", "step / fwd"],
        rows,
    )


# ----------------------------------------------------------------------------- (c)
def predict_row(n: int, Xs: torch.Tensor, i: int, repeats: int) -> list:
    """Seconds per test point of ``posterior(Xs)`` after ``fit(steps=0)`` at ``n``."""
    d, t = Xs.shape[1], Xs.shape[0]
    X, y = synthetic(n, d, seed=n + 1)
    kernel = pn.kernels.RBF(lengthscale=torch.full((d,), 0.5, dtype=F64))
    backend = "chunked" if n >= 50_000 else "auto"
    m = pn.gp.CaGP(kernel, NOISE0, i, backend=backend)
    t0 = time.perf_counter()
    m.fit(X, y, steps=0, generator=torch.Generator().manual_seed(0))
    fit_s = time.perf_counter() - t0
    times = []
    for _ in range(repeats + 1):  # round 0 warms up
        gc.collect()
        t0 = time.perf_counter()
        post = m.posterior(Xs)  # computes .mean and .var
        times.append(time.perf_counter() - t0)
        assert bool(torch.isfinite(post.mean).all() and (post.var >= 0).all())
    per_point = statistics.median(times[1:]) / t
    print(f"predict n={n}: {per_point:.3g} s per test point (fit {fit_s:.1f} s)", flush=True)
    return [n, backend, f"{fit_s:.1f}", per_point, per_point / (n * d)]


def part_predict(args) -> None:
    d, i = 8, 64
    Xs, _ = synthetic(args.predict_points, d, seed=7)
    rows = [
        args.store.unit(args.store.key("predict", n), predict_row, n, Xs, i, args.repeats)
        for n in args.predict_n
    ]
    for r in rows:
        r.append(r[4] / rows[0][4])
    print_table(
        f"(c) CaGP prediction time per test point (i = {i}, d = {d}, {args.predict_points} "
        f"test points, median of {args.repeats}; fit(steps=0) not timed)",
        ["n", "backend", "fit s", "s / test point", "s / point / (n d)", "relative"],
        rows,
    )


# ----------------------------------------------------------------------------- (d)
def gap_data(freq: float, n: int = 300, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """1-d inputs on [0, 1] ∪ [2, 3] and ``y = sin(freq · x) + 0.1 ε``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g, dtype=F64)
    x = torch.where(torch.arange(n) % 2 == 0, x, x + 2.0)
    y = torch.sin(freq * x) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return x.unsqueeze(1), y


def gap_models(X, y, grid, args) -> dict[str, tuple[torch.Tensor, torch.Tensor, float]]:
    """Latent mean, variance at ``grid`` and noise of CaGP (random and k-means blocks,
    16 actions, the default rates), SVGP (16 inducing points) and the exact GP, each trained from
    lengthscale 1 and noise 0.1."""
    out = {}
    for blocks in ("random", "kmeans"):
        m = pn.gp.CaGP(pn.kernels.RBF(lengthscale=1.0), NOISE0, 16, blocks=blocks)
        m.fit(X, y, steps=args.figure_steps, generator=torch.Generator().manual_seed(0))
        post = m.posterior(grid)
        out[f"CaGP, {blocks} blocks"] = (post.mean, post.var, m.noise)
    model, lik = svgp_model(X, 16, seed=0)
    train_svgp(model, lik, X, y, budget=math.inf, batch=X.shape[0], seed=0,
               max_steps=args.figure_svgp_steps)  # fmt: skip
    out["SVGP"] = latent(model, lik, grid)
    k = pn.kernels.RBF(lengthscale=1.0)
    fit = pn.gp.fit_exact_hyperparameters(k, X, y, noise=NOISE0, steps=150)
    pe = pn.gp.ExactGP(k, float(fit.noise)).fit(X, y).posterior(grid)
    out["exact GP"] = (pe.mean, pe.var, float(fit.noise))
    return out


def part_figure(args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = torch.linspace(-0.5, 3.5, 400, dtype=F64).unsqueeze(1)
    in_gap = (grid[:, 0] > 1.2) & (grid[:, 0] < 1.8)
    on_data = (grid[:, 0] >= 0) & (grid[:, 0] <= 1)
    rows, panels = [], {}
    for freq in args.figure_freqs:
        X, y = gap_data(freq)
        bands = args.store.unit(args.store.key("figure", freq), gap_models, X, y, grid, args)
        panels[freq] = (X, y, bands)
        for label, (_, var, noise) in bands.items():
            sd = var.clamp_min(0).sqrt()
            rows.append([f"sin {freq}x", label, noise, float(sd[in_gap].mean()),
                         float(sd[on_data].mean())])  # fmt: skip
    print_table(
        f"(d) 1-d data with a gap (i = m = 16; CaGP {args.figure_steps} Adam steps, default "
        "rates; "
        f"SVGP {args.figure_svgp_steps} full-batch steps at 0.01): mean posterior sd of f",
        ["data", "model", "noise", "sd in gap [1.2, 1.8]", "sd on data [0, 1]"],
        rows,
    )
    ncol = len(next(iter(panels.values()))[2])
    fig, axes = plt.subplots(len(panels), ncol, figsize=(4.2 * ncol, 3.2 * len(panels)),
                             sharex=True, squeeze=False)  # fmt: skip
    for row, (freq, (X, y, bands)) in zip(axes, panels.items(), strict=True):
        for ax, (label, (mu, var, noise)) in zip(row, bands.items(), strict=True):
            sd = var.clamp_min(0).sqrt()
            ax.fill_between(grid[:, 0], mu - 2 * sd, mu + 2 * sd, color="C0", alpha=0.25,
                            label="± 2 sd of f")  # fmt: skip
            ax.plot(grid[:, 0], mu, "C0-", lw=1.5, label="mean")
            ax.plot(X[:, 0], y, "k.", ms=2, label="data")
            ax.axvspan(1.2, 1.8, color="0.92", zorder=0)
            ax.set_title(f"y = sin {freq}x: {label} (noise {noise:.3f})", fontsize=8)
            ax.set_ylim(-3, 3)
    for ax in axes[-1]:
        ax.set_xlabel("x")
    axes[0, 0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)
    plt.close(fig)
    print(f"figure written to {FIGURE}")


# ----------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=SETS)
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--first-split", type=int, default=0,
                        help="the first of the --splits consecutive splits (to run splits "
                        "in separate processes)")  # fmt: skip
    parser.add_argument("--max-train", type=int, default=1500)
    parser.add_argument("--max-test", type=int, default=2000)
    parser.add_argument("--actions", type=int, default=256, help="CaGP's i (capped by n)")
    parser.add_argument("--steps", type=int, default=200, help="CaGP's Adam steps")
    parser.add_argument("--lr", type=float, default=None,
                        help="CaGP's Adam rate (default: the model's defaults)")  # fmt: skip
    parser.add_argument("--sgpr-lr", type=float, default=0.1, help="SGPR's Adam rate")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS,
                        help="which models to run (SVGP and SGPR get CaGP's wall time "
                        "only when CaGP runs first)")  # fmt: skip
    parser.add_argument("--inducing", type=int, default=256, help="SVGP's inducing points")
    parser.add_argument("--batch", type=int, default=256, help="SVGP's minibatch")
    parser.add_argument("--exact-fit", type=int, default=800,
                        help="rows the exact GP's hyperparameters are fitted on")  # fmt: skip
    parser.add_argument("--iter-steps", type=int, default=60, help="IterGP training steps")
    parser.add_argument("--fallback-budget", type=float, default=30.0,
                        help="SVGP/SGPR seconds if CaGP fails")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=3, help="(b), (c): timed repeats")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--quick", action="store_true", help="a smoke run, not the check")
    add_resume_arguments(parser)
    args = parser.parse_args()
    args.models = [key for key in MODELS if key in args.models]  # CaGP first: the budget
    parts = args.parts.split(",")
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)}; choose from {PARTS}")
    args.cost_n = [2000, 5000, 10_000]
    args.predict_n = [1000, 10_000, 100_000]
    args.predict_points = 1000
    args.figure_steps, args.figure_svgp_steps, args.figure_freqs = 500, 3000, (3, 8, 12)
    if args.quick:
        args.datasets, args.splits, args.max_train, args.max_test = args.datasets[:1], 1, 400, 500
        args.actions, args.steps, args.inducing, args.exact_fit = 64, 30, 64, 300
        args.iter_steps, args.repeats = 5, 1
        args.cost_n, args.predict_n, args.predict_points = [2000], [1000, 4000, 16_000], 200
        args.figure_steps, args.figure_svgp_steps, args.figure_freqs = 100, 500, (3, 12)
    args.store = ResultStore.from_args(
        __file__, args, ignore=("parts", "datasets", "splits", "first_split")
    )
    torch.set_num_threads(1)
    print(f"bench_cagp: torch {torch.__version__}, one thread; {load_average()}", flush=True)
    t0 = time.perf_counter()
    for part, fn in (("uci", part_uci), ("cost", part_cost), ("predict", part_predict),
                     ("figure", part_figure)):  # fmt: skip
        if part in parts:
            start = time.perf_counter()
            fn(args)
            print(f"[part {part}: {time.perf_counter() - start:.0f} s]", flush=True)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s; {load_average()}")
    print(args.store.summary(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
