"""QSGP (Evans & Nair 2020): time per step flat in ``n`` and ``m``; the control variate vs ``n̄``.

Part 1: one training step (draw, estimate, backward, sparse AdaGrad,
control-variate bookkeeping, Adam on the hyperparameters) on synthetic data, for
``n, m ∈ {10³, 10⁴, 10⁵}`` at fixed ``ñ = 100``, ``m̃ = 500``, chevron rank 20, ``n̄ =
100``: median seconds per step over ``--steps`` steps, all nine models stepped in
interleaved rounds of 5 (a change of load hits every size alike), and the ratio to
``n = m = 10³``. A step touches ``|ĩ ∪ j̃| ≤ 2 m̃`` basis functions: at ``m = 10³`` the
two draws of 500 overlap (about 630 distinct), from ``m = 10⁴`` on they hardly do
(about 990), so the cost rises once from ``m = 10³`` to ``10⁴`` and is flat beyond;
what grows with ``n`` and ``m`` otherwise is only the one-off set-up.

Part 2 (Evans & Nair 2020, Fig. 1): the variance of the estimate's term ``(1/σ²) μᵀΦᵀΦμ`` and of its
gradient in ``μ`` (averaged over the touched elements) against the control variate's
rank ``n̄``, normalised by ``n̄ = 0``; ``μ`` a prior draw, ``ñ = m̃ = 500``, on protein
(UCI split 0, standardised), ``m = 10⁴`` features of an RBF kernel with the data's
median-distance lengthscale. ``y = 0`` and a constant mean-field ``C`` leave that term
the only random one.

Usage: ``python benchmarks/bench_qsgp_cost.py [--steps 40] [--draws 300] [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import print_table

import pnsolve as pn
from pnsolve.gp.qsgp.estimator import estimate
from pnsolve.gp.qsgp.sampling import draw_indices


def _model(n: int, m: int):
    """A model on synthetic data, set up and warmed up by 5 steps."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 8, generator=g, dtype=torch.float64)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    q = pn.gp.QSGP(
        pn.kernels.RBF(lengthscale=2.0), pn.likelihoods.Gaussian(0.1), m, covariance="chevron",
        rank=20, batch_size=100, feature_batch_size=500, control_variate_rank=100,
        generator=torch.Generator().manual_seed(1),
    )  # fmt: skip
    fit_g = torch.Generator().manual_seed(2)
    t0 = time.perf_counter()
    q.fit(X, y, steps=5, generator=fit_g, freeze_hyperparameters=0, warm_start=0)
    return q, X, y, fit_g, time.perf_counter() - t0


def _interleaved_step_times(sizes: list[int], steps: int) -> dict[tuple[int, int], tuple]:
    """Median seconds per step of every (n, m), measured in interleaved rounds of 5
    steps (so that a change of load on a shared machine hits every size alike)."""
    runs = {(n, m): _model(n, m) for n in sizes for m in sizes}
    for _ in range(max(1, steps // 5)):
        for q, X, y, g, _ in runs.values():
            q.fit(X, y, steps=q.steps_done + 5, generator=g, freeze_hyperparameters=0)
    return {
        key: (statistics.median(h["seconds"] for h in q.history[5:]), setup)
        for key, (q, _, _, _, setup) in runs.items()
    }


def _fig1(nbars: list[int], draws: int, m: int) -> list[list[str]]:
    ds = pn.datasets.load_uci("protein", split=0)
    X = ds.X_train.double()
    n = X.shape[0]
    sub = X[torch.randperm(n, generator=torch.Generator().manual_seed(0))[:1000]]
    ell = float(torch.cdist(sub, sub).median())
    y = torch.zeros(n, dtype=torch.float64)
    rows, base = [], None
    for nbar in nbars:
        q = pn.gp.QSGP(
            pn.kernels.RBF(lengthscale=ell), pn.likelihoods.Gaussian(0.1), m,
            covariance="diagonal", batch_size=500, feature_batch_size=500,
            control_variate_rank=nbar, generator=torch.Generator().manual_seed(1),
        )  # fmt: skip
        q.build(X)
        with torch.no_grad():
            q.mean_weights.copy_(torch.randn(m, generator=torch.Generator().manual_seed(3),
                                             dtype=torch.float64))  # fmt: skip
            q.cov.log_diag.fill_(-3.0)
        cv = q.build_control_variates(X, y)
        g = torch.Generator().manual_seed(4)
        values, grads = [], []
        for _ in range(draws):
            d = draw_indices(n, m, 0, 500, 500, g)
            est = estimate(q.features, q.cov, q.mean_weights, torch.tensor(0.1, dtype=X.dtype),
                           q.likelihood, X, y, d, cv, q.quadrature(X))  # fmt: skip
            (gr,) = torch.autograd.grad(est.elbo, est.leaves.mu)
            full = torch.zeros(m, dtype=X.dtype)
            full[d.u] = gr
            values.append(float(est.elbo.detach()))
            grads.append(full)
        v = torch.tensor(values).var().item()
        gv = torch.stack(grads).var(0).mean().item()
        if base is None:
            base = (v, gv)
        rows.append([nbar, f"{v / base[0]:.3f}", f"{gv / base[1]:.3f}"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per (n, m)")
    parser.add_argument("--draws", type=int, default=300, help="estimates per n̄ (Fig. 1)")
    parser.add_argument("--quick", action="store_true", help="n, m ∈ {10³, 10⁴}, 100 draws")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    if args.quick:
        args.steps, args.draws = 15, 100
    _model(1_000, 1_000)  # warm-up (first allocations), not reported
    times = _interleaved_step_times(sizes, args.steps)
    ref = times[(sizes[0], sizes[0])][0]
    rows = [
        [n, m, f"{1e3 * s:.2f}", f"{s / ref:.2f}", f"{setup:.1f}"]
        for (n, m), (s, setup) in times.items()
    ]
    print_table(
        "QSGP: median time per training step (ñ = 100, m̃ = 500, chevron rank 20, n̄ = 100)",
        ["n", "m", "ms / step", "÷ (10³, 10³)", "set-up + 5 steps (s)"],
        rows,
    )
    nbars = [0, 10, 50, 100, 300, 500, 1000]
    print_table(
        "Fig. 1: variance of (1/σ²) μᵀΦᵀΦμ and of its μ-gradient vs control-variate rank n̄ "
        f"(protein, m = {10_000 if not args.quick else 2_000}, ñ = m̃ = 500, normalised by n̄ = 0)",
        ["n̄", "objective variance", "gradient variance"],
        _fig1(nbars, args.draws, 10_000 if not args.quick else 2_000),
    )


if __name__ == "__main__":
    main()
