"""CaGP's default Adam rates, chosen by the ELBO they reach on UCI sets outside the table.

The UCI table of ``bench_cagp.py`` (elevators, pol, bike, protein, keggdirected) must be
measured at settings that were not tuned on it, so the rates are chosen here on the
other UCI sets this package ships: parkinsons, skillcraft, airfoil and concrete (split
0, all training rows up to 5 000, standardised as in ``bench_cagp.py``), ARD RBF from
lengthscales 1, outputscale 1, noise 0.1, 256 block-sparse actions (capped by ``n``),
200 steps. Candidates: a constant rate 0.1, 0.2 or 0.3 on the hyperparameters with the
actions at 0.1, and 0.3 (actions 0.1) decaying by a factor ``γ`` per step (``γ`` = 0.995
or 0.99, applied every 10 steps through ``fit``'s resumable runs). The criterion is the
ELBO per training row after the 200 steps (a training-set quantity: no test data is
read); the test NLL is printed beside it. docs/cagp.md ("Training") quotes the result.

Usage: ``python benchmarks/bench_cagp_rates.py [--datasets parkinsons,skillcraft,...]
[--quick]``; about 20 minutes on one core (``--quick``: one small set, 20 steps, a smoke
run whose numbers are not the check).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from _common import ResultStore, add_resume_arguments
from bench_cagp import NOISE0, rbf, scores, split_data

import pnsolve as pn

SETS = ("parkinsons", "skillcraft", "airfoil", "concrete")
#: (label, hyperparameter rate, actions' rate, decay per step)
CANDIDATES = (
    ("0.1", 0.1, 0.1, 1.0),
    ("0.2", 0.2, 0.1, 1.0),
    ("0.3", 0.3, 0.1, 1.0),
    ("0.3 × 0.995^t", 0.3, 0.1, 0.995),
    ("0.3 × 0.99^t", 0.3, 0.1, 0.99),
)
#: Steps between rate changes of a decaying candidate.
CHUNK = 10


def fit(X, y, *, steps: int, lr: float, action_lr: float, decay: float) -> pn.gp.CaGP:
    """A CaGP fitted from the benchmark's initial values at the candidate's rates."""
    m = pn.gp.CaGP(rbf(X.shape[1]), NOISE0, min(256, X.shape[0]))
    gen = torch.Generator().manual_seed(1)
    if decay == 1.0:
        return m.fit(X, y, steps=steps, lr=lr, action_lr=action_lr, generator=gen)
    for start in range(0, steps, CHUNK):  # one run: steps count from its first step
        f = decay**start
        m.fit(X, y, steps=min(start + CHUNK, steps), lr=lr * f, action_lr=action_lr * f,
              generator=gen)  # fmt: skip
    return m


def fit_score(X, y, Xs, ys, steps: int, lr: float, action_lr: float, decay: float) -> list:
    """One candidate on one set: ELBO per training row, test NLL, seconds."""
    t0 = time.perf_counter()
    m = fit(X, y, steps=steps, lr=lr, action_lr=action_lr, decay=decay)
    seconds = time.perf_counter() - t0
    post = m.posterior(Xs)
    nll = scores(post.mean, post.var + m.noise, ys)[1]
    return [m.elbo(X, y) / X.shape[0], nll, seconds]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(SETS))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a smoke run, not the check")
    add_resume_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.datasets.split(",")
    if args.quick:
        names, args.steps = ["concrete"], 20
    store = ResultStore.from_args(__file__, args)
    print(f"bench_cagp_rates: torch {torch.__version__}, one thread, {args.steps} steps")
    print(f"{'data':<11} {'n':>5} {'rate':<14} {'ELBO/n':>8} {'test NLL':>8} {'s':>5}")
    best: dict[str, str] = {}
    for name in names:
        X, y, Xs, ys = split_data(name, 0, 5000, 2000)
        elbos = {}
        for label, lr, action_lr, decay in CANDIDATES:
            elbos[label], nll, seconds = store.unit(
                store.key(name, label), fit_score, X, y, Xs, ys, args.steps, lr, action_lr, decay
            )
            print(f"{name:<11} {X.shape[0]:>5} {label:<14} {elbos[label]:8.4f} {nll:8.4f} "
                  f"{seconds:5.0f}", flush=True)  # fmt: skip
        best[name] = max(elbos, key=elbos.__getitem__)
    for name, label in best.items():
        print(f"{name}: highest ELBO at rate {label}")
    print(store.summary(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
