"""Filippone & Engler (2015) §5.2 at CPU scale: SGLD-ULISSE chains on a larger UCI set, matrix-free.

Protein (UCI split 0, standardised), ``n`` training rows drawn at random, the paper's
covariance ``σ exp(−τ‖x − x'‖²) + λδ`` with Gamma(1, 1) priors in log space, SGLD with
ULISSE gradients (4 probes redrawn every 20 iterations with warm starts, ``α = q √n``,
roulette rate ``β``), ``M`` from the MAP of a 1000-point subset (as the paper's §5.2),
chains from ``N(MAP, M)``. Every
product with ``K̂`` and the gradient's bilinear forms go through the ``"chunked"``
backend: no ``n × n`` matrix is ever held (peak memory is printed).

Reported: seconds and products per iteration, the PSRF of the chains (from iteration 0
and on the kept draws), ESS, independent samples per chain-hour and per wall-hour, and
posterior means and sds. ``--time-n`` additionally times one chain's iterations at a
second, larger ``n`` (the paper's ``n ≈ 20 000``) and extrapolates samples per hour there
from this run's ESS per iteration.

Usage: ``python benchmarks/bench_sgld_large.py [--n 2000] [--chains 5] [--iterations
1200] [--q 0.03] [--beta 0.3] [--freeze 0.02] [--step-start 0.03] [--step-end 1e-3]
[--subset 1000] [--time-n 20000] [--time-iterations 3] [--checkpoint PREFIX] [--quick]``.
The defaults (docs/sgld.md's "tuned" SGLD; the paper's own §5.2 schedule is
``--step-start 5e-2 --step-end 5e-6``) take about 35 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ResultStore, add_resume_arguments, print_table

import pnsolve as pn
from pnsolve.gp.bayes import (
    ChainConfig,
    LogHyperparameters,
    LogMarginalGradient,
    sample_hyperparameters,
)
from pnsolve.gp.bayes.sgld import SGLD


def _subsample(ds, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(ds.X_train.shape[0], generator=g)[:n]
    return ds.X_train[idx].double(), ds.y_train[idx].double()


def _peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


def _time_large(
    ds, n: int, args: argparse.Namespace, theta: torch.Tensor, M: torch.Tensor
) -> tuple[float, float]:
    """Seconds and products per SGLD iteration of one chain at ``n`` (one thread)."""
    q, iterations = args.q, args.time_iterations
    X, y = _subsample(ds, n, seed=2)
    params = LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1, parametrization="log_tau")
    g = torch.Generator().manual_seed(3)
    grad = LogMarginalGradient(params, X, y, generator=g, alpha=q * n**0.5, beta=args.beta,
                               backend="chunked")  # fmt: skip
    sgld = SGLD(grad, params.log_prior_grad, M, step_start=args.step_start, step_end=args.step_end)
    state = sgld.start(theta, iterations + 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sgld.advance(state, 1, g)  # the first solve starts cold
        products, t0 = state.products, time.perf_counter()
        sgld.advance(state, iterations, g)
        seconds = time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)
    return seconds / iterations, (state.products - products) / iterations


def _chains(X, y, cfg, args, params, store: ResultStore) -> tuple:
    """The SGLD chains, their wall time and the peak RSS after them.

    Without ``--checkpoint`` the chains checkpoint into the results folder.
    """
    t0 = time.perf_counter()
    out = sample_hyperparameters(
        X, y, cfg, chains=args.chains, generator=torch.Generator().manual_seed(0),
        params=params, processes=args.processes,
        checkpoint=args.checkpoint or store.checkpoint("chains"),
    )  # fmt: skip
    return out, time.perf_counter() - t0, _peak_mb()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="protein")
    parser.add_argument("--n", type=int, default=2000, help="training rows drawn at random")
    parser.add_argument("--chains", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=1200, help="SGLD iterations per chain")
    parser.add_argument("--q", type=float, default=0.03, help="early threshold α = q √n")
    parser.add_argument("--beta", type=float, default=0.3, help="roulette rate β")
    parser.add_argument("--freeze", type=float, default=0.02, help="eq. 7 freeze threshold")
    paper = "Filippone & Engler (2015) §5.2"
    parser.add_argument("--step-start", type=float, default=3e-2, help=f"{paper}: 5e-2")
    parser.add_argument("--step-end", type=float, default=1e-3, help=f"{paper}: 5e-6")
    parser.add_argument("--subset", type=int, default=1000, help="MAP/Laplace subset (1000)")
    parser.add_argument("--processes", type=int, default=None)
    parser.add_argument("--time-n", type=int, default=20_000, help="n of the timing run (0: none)")
    parser.add_argument("--time-iterations", type=int, default=3)
    parser.add_argument("--checkpoint", default=None, help="per-chain checkpoint prefix")
    parser.add_argument("--quick", action="store_true", help="n = 1000, 2 × 200, timing at 2000")
    add_resume_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.n, args.chains, args.iterations, args.time_n, args.time_iterations = (
            1000, 2, 200, 2000, 2,
        )  # fmt: skip
    ds = pn.datasets.load_uci(args.dataset, split=0)
    X, y = _subsample(ds, args.n, seed=1)
    n = X.shape[0]
    params = LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1, parametrization="log_tau")
    cfg = ChainConfig(
        iterations=args.iterations, alpha=args.q * n**0.5, beta=args.beta, backend="chunked",
        checkpoint_every=max(1, min(100, args.iterations // 10)), subset=args.subset,
        step_start=args.step_start, step_end=args.step_end, freeze_threshold=args.freeze,
        # the paper's estimator, as in the documented run (not the library's defaults)
        num_probes=4, redraw_every=20, variance_batch=100, preconditioner_rank=0,
    )  # fmt: skip
    store = ResultStore.from_args(__file__, args, ignore=("processes", "checkpoint"))
    # units: the chains (checkpointed as they run, so an interrupted run continues them)
    # and the timing run; each with the peak RSS it printed
    out, wall, peak = store.unit("chains", lambda: _chains(X, y, cfg, args, params, store))
    T = args.iterations
    chain_seconds = sum(out.seconds)
    per_it = chain_seconds / (args.chains * T)
    products = sum(out.products) / (args.chains * T)
    print_table(
        f"{args.dataset}: n = {n} (matrix-free), {args.chains} chains × {T} SGLD-ULISSE "
        f"iterations, q = {args.q}, β = {args.beta}, freeze {args.freeze}, ε "
        f"{args.step_start:g} → {args.step_end:g}, M from {args.subset} points",
        ["wall s", "chain-seconds", "s / iteration", "products / iteration", "peak RSS MB",
         "n×n float64 MB", "kept from", "frozen"],
        [[f"{wall:.0f}", f"{chain_seconds:.0f}", f"{per_it:.3g}", f"{products:.1f}",
          f"{peak:.0f}", f"{n * n * 8 / 2**20:.0f}", out.start, out.frozen]],
    )  # fmt: skip
    prefixes = [k for k in (50, 100, 200, 400, 600, 800, 1000, 2000, 4000) if k < T] + [T]
    psrf, upper = pn.metrics.psrf_curve(out.all_samples, prefixes)
    print_table(
        "PSRF from iteration 0 (no burn-in removed): median / 97.5 %",
        ["iterations", *params.names],
        [[k, *[f"{psrf[j, i]:.3f}/{upper[j, i]:.3f}" for i in range(params.dim)]]
         for j, k in enumerate(prefixes)],
    )  # fmt: skip
    kept = out.samples
    rows, ess = [], None
    if kept.shape[1] >= 8:
        ess = pn.metrics.ess(kept)
        final = pn.metrics.psrf_curve(kept, [kept.shape[1]])[0][0]
        pooled = kept.reshape(-1, params.dim)
        for i, name in enumerate(params.names):
            rows.append([name, f"{pooled[:, i].mean():.4f}", f"{pooled[:, i].std():.4f}",
                         f"{final[i]:.3f}", f"{ess[i]:.0f}"])  # fmt: skip
        print_table(
            f"posterior on the kept draws ({kept.shape[1]} per chain)",
            ["param", "mean", "sd", "PSRF", "ESS"],
            rows,
        )
        hours = chain_seconds / 3600
        smallest = float(ess.min())
        kept_share = kept.shape[1] / T
        per_chain_hour = smallest / hours
        print_table(
            "independent samples per hour (smallest ESS)",
            ["ESS", "per chain-hour", f"per wall-hour ({args.chains} chains)", "ESS / iteration"],
            [[f"{smallest:.0f}", f"{per_chain_hour:.3g}", f"{smallest / (wall / 3600):.3g}",
              f"{smallest / (args.chains * T * kept_share):.3g}"]],
        )  # fmt: skip
    if args.time_n:
        s_it, p_it, peak = store.unit("timing", lambda: (
            *_time_large(ds, args.time_n, args, out.laplace.theta, out.laplace.M), _peak_mb()
        ))  # fmt: skip
        row = [args.time_n, f"{s_it:.3g}", f"{p_it:.1f}", f"{s_it / per_it:.3g}"]
        if ess is not None:
            ess_per_it = float(ess.min()) / (args.chains * kept.shape[1])
            row.append(f"{3600 * ess_per_it / s_it:.3g}")
        else:
            row.append("n/a")
        print_table(
            f"timing at n = {args.time_n} (matrix-free, one chain, one thread, "
            f"{args.time_iterations} warm iterations; extrapolated samples per chain-hour "
            "assume this run's ESS per kept iteration)",
            ["n", "s / iteration", "products / iteration", f"÷ n = {n}", "samples / chain-hour"],
            [row],
        )
        print(f"peak RSS {peak:.0f} MB (an n × n float64 matrix at n = {args.time_n}: "
              f"{args.time_n**2 * 8 / 2**20:.0f} MB)")  # fmt: skip
    print(store.summary(), file=sys.stderr)


if __name__ == "__main__":
    main()
