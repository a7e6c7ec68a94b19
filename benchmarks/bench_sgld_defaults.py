"""SGLD with the default ``ChainConfig`` against exact Metropolis–Hastings on one data set.

The check behind the defaults of ``pnsolve sample`` (docs/sgld.md, "The defaults,
checked against Metropolis–Hastings"): ``C`` SGLD chains of ``T`` iterations with ULISSE
gradients and every other setting at its default, against MH on the exact likelihood
(2 chains × 20 000, the first 4 000 discarded), on ``rows`` random training rows of a
UCI set (standardised; 90 % of them, as a train split) or on a synthetic set built like
*yacht* (6 inputs on a grid, a smooth target, noise variance ≈ 0.002: the small-noise
case where plain CG fails). Reported per chain: the mean's offset from MH's in MH
posterior sds, the sd's ratio to MH's, and the PSRF of the chains; the targets are
|offset| ≤ 0.5, ratio in [0.5, 2] and PSRF < 1.2.

Usage: ``python benchmarks/bench_sgld_defaults.py [--dataset airfoil|...|yacht-like]
[--rows 308] [--iterations 10000] [--chains 4] [--quick]``; about 5 minutes on two cores
(``--quick``: 2 000 iterations, 2 chains, MH 2 × 4 000: about a minute, a smoke run whose
numbers are not the check).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import torch
from _common import ResultStore, add_resume_arguments

import pnsolve as pn
from pnsolve.gp.bayes import ChainConfig, sample_hyperparameters
from pnsolve.metrics import gelman_rubin

T = TypeVar("T")

OFFSET, RATIO, PSRF = 0.5, (0.5, 2.0), 1.2


def yacht_like(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Six inputs on small grids, a target growing exponentially in the last, tiny noise."""
    f64 = torch.float64
    cols = []
    for levels in (5, 4, 6, 5, 4):
        grid = torch.linspace(-1, 1, levels, dtype=f64)
        cols.append(grid[torch.randint(0, levels, (n,), generator=generator)])
    speed = torch.linspace(0.125, 0.45, 14, dtype=f64)[
        torch.randint(0, 14, (n,), generator=generator)
    ]
    cols.append(speed)
    X = torch.stack(cols, 1)
    y = 0.5 * torch.exp(14 * (speed - 0.125)) * (1 + 0.1 * X[:, 0] - 0.05 * X[:, 2])
    y = y + 0.02 * torch.randn(n, generator=generator, dtype=f64)
    return X, y


def rows_of(name: str, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``0.9 n`` standardised training rows of ``name`` (a UCI set, or ``yacht-like``)."""
    if name == "yacht-like":
        X, y = yacht_like(n, generator)
    else:
        ds = pn.datasets.load_uci(name, split=0)
        idx = torch.randperm(ds.X_train.shape[0], generator=generator)[:n]
        X, y = ds.X_train[idx].double(), ds.y_train[idx].double()
    X = (X - X.mean(0)) / X.std(0).clamp_min(1e-12)
    y = (y - y.mean()) / y.std()
    m = int(0.9 * X.shape[0])
    return X[:m], y[:m]


def timed(run: Callable[[], T]) -> tuple[T, float]:
    """``run()``'s value and its wall time in seconds."""
    t0 = time.perf_counter()
    return run(), time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="airfoil", help="UCI set name, or yacht-like")
    parser.add_argument("--rows", type=int, default=308, help="rows drawn (90 %% train)")
    parser.add_argument("--iterations", type=int, default=10_000, help="SGLD per chain")
    parser.add_argument("--chains", type=int, default=4, help="SGLD chains")
    parser.add_argument("--mh", type=int, default=20_000, help="MH iterations per chain")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke run, not the check")
    add_resume_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.chains, args.mh = 2_000, 2, 4_000
    X, y = rows_of(args.dataset, args.rows, torch.Generator().manual_seed(args.seed))
    print(f"{args.dataset}: n = {X.shape[0]}, d = {X.shape[1]}", flush=True)
    store = ResultStore.from_args(__file__, args)
    # two units, the MH and the SGLD chains: a finished one is loaded, not rerun
    mh, t_mh = store.unit("mh", lambda: timed(lambda: sample_hyperparameters(
        X, y, ChainConfig(sampler="mh", iterations=args.mh), chains=2,
        generator=torch.Generator().manual_seed(args.seed + 1),
    )))  # fmt: skip
    sg, t_sgld = store.unit("sgld", lambda: timed(lambda: sample_hyperparameters(
        X, y, ChainConfig(iterations=args.iterations), chains=args.chains,
        generator=torch.Generator().manual_seed(args.seed + 2),
    )))  # fmt: skip
    ref = mh.samples.reshape(-1, mh.samples.shape[-1])
    mu, sd = ref.mean(0), ref.std(0)
    offsets = (sg.samples.mean(1) - mu) / sd
    ratios = sg.samples.std(1) / sd
    psrf = gelman_rubin(sg.samples)[0] if args.chains > 1 else torch.full_like(mu, float("nan"))
    per_iteration = sum(sg.products) / len(sg.products) / args.iterations
    print(f"MH: 2 × {args.mh} in {t_mh:.0f} s; SGLD: {args.chains} × {args.iterations} in "
          f"{t_sgld:.0f} s wall, {per_iteration:.1f} products per iteration")  # fmt: skip
    print(f"{'parameter':<12} {'MH mean':>9} {'MH sd':>8} {'max |offset|':>13} "
          f"{'sd ratios':>13} {'PSRF':>7}")  # fmt: skip
    for j, name in enumerate(sg.names):
        lo, hi = float(ratios[:, j].min()), float(ratios[:, j].max())
        print(f"{name:<12} {float(mu[j]):9.3f} {float(sd[j]):8.3f} "
              f"{float(offsets[:, j].abs().max()):13.2f} {f'{lo:.2f}–{hi:.2f}':>13} "
              f"{float(psrf[j]):7.3f}")  # fmt: skip
    met = (
        bool((offsets.abs() <= OFFSET).all())
        and bool(((ratios >= RATIO[0]) & (ratios <= RATIO[1])).all())
        and bool((psrf < PSRF).all())
    )
    print(f"targets (|offset| ≤ {OFFSET}, sd ratio in {list(RATIO)}, PSRF < {PSRF}): "
          f"{'met' if met else 'MISSED'}")  # fmt: skip
    print(store.summary(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
