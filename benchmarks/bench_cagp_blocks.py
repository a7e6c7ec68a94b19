"""CaGP's blocks: a random permutation against k-means clusters of the inputs, on UCI sets.

For each set and split: 2 000 random training and 1 000 test rows (standardised on the
training rows), an ARD RBF kernel, 64 actions, 150 Adam steps at the defaults, once
with ``blocks="random"`` and once with ``blocks="kmeans"``; test RMSE, test NLL of
``y`` and the ELBO per training row. docs/cagp.md quotes the result.

Usage: ``python benchmarks/bench_cagp_blocks.py [--datasets elevators,bike,protein]
[--splits 3] [--quick]``; about 15 minutes on one core (``--quick``: one set, one
split, 20 steps: under a minute, a smoke run whose numbers are not the check).
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import torch
from _common import ResultStore, add_resume_arguments

import pnsolve as pn

F64 = torch.float64


def rows(name: str, n: int, t: int, split: int):
    """``n`` training and ``t`` test rows of a split, standardised on the training rows."""
    ds = pn.datasets.load_uci(name, split=split)
    g = torch.Generator().manual_seed(split)
    tr = torch.randperm(ds.X_train.shape[0], generator=g)[:n]
    te = torch.randperm(ds.X_test.shape[0], generator=g)[:t]
    X, y = ds.X_train[tr].to(F64), ds.y_train[tr].to(F64)
    Xs, ys = ds.X_test[te].to(F64), ds.y_test[te].to(F64)
    mu, sd = X.mean(0), X.std(0).clamp_min(1e-12)
    ym, ysd = y.mean(), y.std()
    return (X - mu) / sd, (y - ym) / ysd, (Xs - mu) / sd, (ys - ym) / ysd


def fit_score(X, y, Xs, ys, blocks: str, steps: int, split: int) -> list[float]:
    """Fit one CaGP with the given blocks: test RMSE, test NLL, ELBO per row, seconds."""
    m = pn.gp.CaGP(
        pn.kernels.RBF(lengthscale=torch.ones(X.shape[1], dtype=F64)), 0.1, 64, blocks=blocks
    )
    t0 = time.perf_counter()
    m.fit(X, y, steps=steps, generator=torch.Generator().manual_seed(split))
    seconds = time.perf_counter() - t0
    post = m.posterior(Xs)
    var = post.var + m.noise
    rmse = float((post.mean - ys).square().mean().sqrt())
    nll = float((0.5 * torch.log(2 * math.pi * var)
                 + (ys - post.mean) ** 2 / (2 * var)).mean())  # fmt: skip
    return [rmse, nll, float(m.elbo(X, y) / X.shape[0]), seconds]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="elevators,bike,protein")
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--quick", action="store_true", help="a smoke run, not the check")
    add_resume_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.datasets.split(",")
    if args.quick:
        names, args.splits, args.steps = names[:1], 1, 20
    store = ResultStore.from_args(__file__, args)
    print(f"{'data':<10} {'split':>5} {'blocks':<7} {'RMSE':>7} {'NLL':>7} {'ELBO/n':>8} {'s':>4}")
    wins = {"elbo": 0, "nll": 0, "rmse": 0, "runs": 0}
    for name in names:
        for split in range(args.splits):
            X, y, Xs, ys = rows(name, 2000, 1000, split)
            scores = {}
            for blocks in ("random", "kmeans"):
                key = store.key(name, split, blocks)
                rmse, nll, elbo, seconds = store.unit(
                    key, fit_score, X, y, Xs, ys, blocks, args.steps, split
                )
                scores[blocks] = (rmse, nll, elbo)
                print(f"{name:<10} {split:>5} {blocks:<7} {rmse:7.4f} {nll:7.4f} {elbo:8.4f} "
                      f"{seconds:4.0f}", flush=True)  # fmt: skip
            r, k = scores["random"], scores["kmeans"]
            wins["rmse"] += k[0] < r[0]
            wins["nll"] += k[1] < r[1]
            wins["elbo"] += k[2] > r[2]
            wins["runs"] += 1
    print(f"k-means better in {wins['elbo']}/{wins['runs']} runs by ELBO, {wins['nll']} by test "
          f"NLL, {wins['rmse']} by test RMSE")  # fmt: skip
    print(store.summary(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
