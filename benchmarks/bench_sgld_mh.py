"""Seed 000 §5.1 at CPU scale: SGLD with ULISSE gradients against Metropolis–Hastings.

Concrete (UCI split 0, standardised, n = 927 training rows), the seed's covariance
``σ exp(−τ‖x − x'‖²) + λδ`` with Gamma(1, 1) priors on ``(σ, τ, λ)`` in log space. MH on the
exact (Cholesky) likelihood with an adaptive phase to acceptance 0.2–0.4 and burn-in;
SGLD with ULISSE gradients (4 Rademacher probes redrawn every 20 iterations, warm
starts, ``α = q √n``, ``β = 1``), ε from 1e-1 to 1e-4, eq. 7 freezing at 0.002, ``M`` the
inverse negative Hessian at the MAP of a 500-point subset, chains from ``N(MAP, M)``.

Reported: posterior means and sds of both, the differences in MH sds and the sd ratios
(targets: |Δmean| ≤ 0.2 MH sd, sds within 20 %), the PSRF (median and 97.5 %) of the
SGLD chains at several iteration counts, ESS and seconds per effective sample of both
(chain-seconds: both samplers measured in the same run), test RMSE/log-likelihood of the
posterior predictive and type-II ML.

Usage: ``python benchmarks/bench_sgld_mh.py [--mh 50000] [--sgld 40000] [--chains 10]
[--q 1.0] [--quick]``; the seed's full setting (defaults) takes hours on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import print_table

import pnsolve as pn
from pnsolve.gp.bayes import (
    ChainConfig,
    LogHyperparameters,
    mixture_predictive,
    sample_hyperparameters,
    type_ii_maximum_likelihood,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mh", type=int, default=50_000, help="MH iterations")
    parser.add_argument("--sgld", type=int, default=40_000, help="SGLD iterations per chain")
    parser.add_argument("--chains", type=int, default=10, help="SGLD chains")
    parser.add_argument("--q", type=float, default=1.0, help="early threshold α = q √n")
    parser.add_argument("--quick", action="store_true", help="2000 MH, 4 × 1500 SGLD, q = 0.1")
    parser.add_argument("--plot", type=Path, default=None, help="trace plot with MH reference")
    args = parser.parse_args()
    if args.quick:
        args.mh, args.sgld, args.chains, args.q = 2000, 1500, 4, 0.1
    ds = pn.datasets.load_uci("concrete", split=0)
    X, y = ds.X_train.double(), ds.y_train.double()
    n = X.shape[0]
    params = LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1, parametrization="seed")
    t0 = time.perf_counter()
    mh = sample_hyperparameters(
        X, y, ChainConfig(sampler="mh", iterations=args.mh), chains=1,
        generator=torch.Generator().manual_seed(0), params=params, processes=1,
    )  # fmt: skip
    cfg = ChainConfig(iterations=args.sgld, alpha=args.q * n**0.5)
    sgld = sample_hyperparameters(
        X, y, cfg, chains=args.chains, generator=torch.Generator().manual_seed(1), params=params
    )
    wall = time.perf_counter() - t0
    ref = mh.samples[0]
    mh_mean, mh_sd = ref.mean(0), ref.std(0)
    pooled = sgld.samples.reshape(-1, params.dim)
    s_mean, s_sd = pooled.mean(0), pooled.std(0)
    ess_mh = pn.metrics.ess(mh.samples, backend="auto")
    ess_sgld = pn.metrics.ess(sgld.samples)
    rows = []
    for i, name in enumerate(params.names):
        rows.append([
            name, f"{mh_mean[i]:.4f}", f"{s_mean[i]:.4f}", f"{mh_sd[i]:.4f}", f"{s_sd[i]:.4f}",
            f"{(s_mean[i] - mh_mean[i]) / mh_sd[i]:+.2f}", f"{s_sd[i] / mh_sd[i]:.2f}",
            f"{ess_mh[i]:.0f}", f"{ess_sgld[i]:.0f}",
        ])  # fmt: skip
    print_table(
        f"concrete: MH {args.mh} its (burn-in {mh.start}, acceptance {mh.acceptance[0]:.2f}) vs "
        f"SGLD-ULISSE {args.chains} × {args.sgld} its (q = {args.q}, kept from {sgld.start}, "
        f"frozen: {sgld.frozen})",
        ["param", "MH mean", "SGLD mean", "MH sd", "SGLD sd", "Δmean/MH sd", "sd ratio",
         "ESS MH", "ESS SGLD"],
        rows,
    )  # fmt: skip
    steps = sorted({max(4, k) for k in torch.linspace(4, sgld.samples.shape[1], 8).long().tolist()})
    psrf, upper = pn.metrics.psrf_curve(sgld.samples, steps)
    print_table(
        "PSRF of the SGLD chains (kept draws): median / 97.5 %",
        ["kept draws", *params.names],
        [[s, *[f"{psrf[j, i]:.3f}/{upper[j, i]:.3f}" for i in range(params.dim)]]
         for j, s in enumerate(steps)],
    )  # fmt: skip
    mh_per = mh.seconds[0] / float(ess_mh.min())
    sgld_per = sum(sgld.seconds) / float(ess_sgld.min())
    print_table(
        "seconds per independent sample (chain-seconds / smallest ESS)",
        ["sampler", "chain-seconds", "smallest ESS", "s per sample", "÷ MH"],
        [["MH", f"{mh.seconds[0]:.0f}", f"{ess_mh.min():.0f}", f"{mh_per:.3g}", "1.00"],
         ["SGLD-ULISSE", f"{sum(sgld.seconds):.0f}", f"{ess_sgld.min():.0f}",
          f"{sgld_per:.3g}", f"{sgld_per / mh_per:.2f}"]],
    )  # fmt: skip
    Xs, ys = ds.X_test.double(), ds.y_test.double()
    ml = type_ii_maximum_likelihood(params, X, y, mh_mean)
    preds = {
        "MH": mixture_predictive(params, mh.samples, X, y, Xs),
        "SGLD-ULISSE": mixture_predictive(params, sgld.samples, X, y, Xs),
        "type-II ML": mixture_predictive(params, ml[None], X, y, Xs),
    }
    print_table(
        "test predictive (standardised targets)",
        ["method", "RMSE", "log-lik"],
        [[k, f"{pn.metrics.rmse(p.mean, ys):.4f}", f"{p.log_likelihood(ys):.4f}"]
         for k, p in preds.items()],
    )  # fmt: skip
    print(f"total wall time {wall:.0f} s")
    if args.plot is not None:
        pn.plotting.plot_traces(sgld.samples, list(params.names), args.plot, reference=ref)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
