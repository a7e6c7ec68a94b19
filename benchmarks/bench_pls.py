"""Probabilistic linear solver cost per iteration: PLS with the CG policy ÷ ``pn.cg``.

Both solvers run on the same dense stored SPD kernel matrix (RBF Gram of ``n``
uniform points in [0, 1]³, lengthscale 0.1, plus 10⁻³·I; float64) with one
right-hand side, for the same fixed number of iterations. The matrix is chosen so
that neither solver converges within the requested count: ``pn.cg`` runs with
``rtol = atol = 0`` (exactly ``maxiter`` iterations), and the PLS, which stops with
``StopReason.BREAKDOWN`` once it has converged to machine precision, only gets
``MaxIterations(iters)``; both iteration counts are checked and printed.

Per iteration the PLS does CG's one product plus ``O(n i)`` work against its stored
factors (``A``-conjugation of the action against all previous directions, which plain
CG skips and which is why it keeps full conjugacy), so its overhead grows with the
iteration count: the ratio is for the *average* iteration of a run. One Gram–Schmidt
pass reads ``V`` for the coefficients, then ``V`` and ``A V`` for the update; the
second pass runs only for nearly dependent actions (Kahan–Parlett), rarely for CG's.
At ``n = 5000`` and 500 iterations (average ``i = 250``) the three reads from memory,
3 × 10 MB against the product's 200 MB, put the ratio's floor near 1.15 before any
Python overhead (``1 + 3i/n``); at ``n = 20000`` or for matrix-free kernels they fade.
Factors above 10⁶ entries are read in two row halves on two threads, like the dense
product.

Timing: ``pn.cg`` and the PLS are interleaved round-robin after a short warm-up
round, and the median over rounds is taken, so drift on a shared machine hits both
alike. Reported: ms per iteration, PLS ÷ ``pn.cg`` (target ≤ 1.15), each solver's
final true relative residual ``‖b − Kx‖/‖b‖``, the relative error against a
Cholesky solve where ``n ≤ 10⁴`` (a Cholesky at ``n = 20000`` would take ~45 s and
9 GB here), and the memory of the PLS factors ``V`` and ``A V`` at the end
(``2 · n · iters · 8`` bytes; ``pn.cg`` keeps O(n)).

Usage: ``python benchmarks/bench_pls.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import print_table, ratio

import pnsolve as pn

LENGTHSCALE = 0.1
NOISE = 1e-3
WARMUP_ITERS = 10


def kernel_matrix(n: int, seed: int = 0) -> torch.Tensor:
    """RBF Gram matrix (lengthscale 0.1) of ``n`` uniform points in [0, 1]³ plus 10⁻³·I."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 3, generator=g, dtype=torch.float64)
    K = torch.cdist(X, X)
    K.square_().mul_(-0.5 / LENGTHSCALE**2).exp_()
    K.diagonal().add_(NOISE)
    return K


def run_size(n: int, iters: int, repeats: int) -> tuple[list[list[object]], list[str]]:
    """Time both solvers at size ``n``; return table rows and notes."""
    K = kernel_matrix(n)
    A = pn.linops.Dense(K, is_symmetric=True)
    b = torch.randn(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    notes: list[str] = []
    out: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}

    def run_cg(k: int) -> None:
        out["pn.cg"], info = pn.cg(A, b, rtol=0.0, atol=0.0, maxiter=k)
        counts["pn.cg"] = info.iterations

    def run_pls(k: int) -> None:
        solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(k))
        belief, info = solver.solve(A, b)
        out["PLS (CG policy)"], counts["PLS (CG policy)"] = belief.mean, info.iterations
        if info.stop_reason is not pn.StopReason.MAX_ITERATIONS:
            notes.append(f"n={n}: PLS stopped early ({info.stop_reason.value})")

    fns = {"pn.cg": run_cg, "PLS (CG policy)": run_pls}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    with torch.no_grad():
        for rnd in range(repeats + 1):  # round 0 is a short warm-up
            for name, fn in fns.items():
                gc.collect()
                t0 = time.perf_counter()
                fn(iters if rnd else WARMUP_ITERS)
                if rnd:
                    samples[name].append(time.perf_counter() - t0)
        for name, k in counts.items():
            if k != iters:
                notes.append(f"n={n}: {name} ran {k} iterations instead of {iters}")
        x_ref = None
        if n <= 10_000:
            chol = torch.linalg.cholesky(K)
            x_ref = torch.cholesky_solve(b.unsqueeze(-1), chol).squeeze(-1)
            del chol
        relres = {k: float(torch.linalg.vector_norm(b - K @ x) / b.norm()) for k, x in out.items()}
        relerr = {
            k: "-" if x_ref is None else f"{float((x - x_ref).norm() / x_ref.norm()):.2e}"
            for k, x in out.items()
        }
        diff = float((out["PLS (CG policy)"] - out["pn.cg"]).norm() / out["pn.cg"].norm())
    notes.append(f"n={n}: ‖x_PLS − x_cg‖ / ‖x_cg‖ = {diff:.2e}")
    times = {name: statistics.median(v) for name, v in samples.items()}
    t_cg = times["pn.cg"] / iters
    rows = []
    for name, t in times.items():
        per_iter = t / iters
        mem = 2 * n * counts[name] * 8 / 2**20 if name != "pn.cg" else 0.0
        rows.append(
            [
                n,
                name,
                counts[name],
                f"{per_iter * 1e3:.2f}",
                ratio(per_iter, t_cg),
                f"{relres[name]:.2e}",
                relerr[name],
                f"{mem:.0f}" if mem else "O(n)",
            ]
        )
    return rows, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        plan = [(1000, 100, 2), (2000, 100, 2)]
    else:
        # n = 20000: a product with the 3.2 GB matrix takes ~0.15–0.3 s here, so 500
        # iterations × 2 solvers × rounds would exceed ~4 minutes; run 250 there.
        plan = [(5000, 500, 3), (20000, 250, 2)]
    rows: list[list[object]] = []
    notes: list[str] = []
    for n, iters, repeats in plan:
        r, nt = run_size(n, iters, repeats)
        rows += r
        notes += nt
    print_table(
        "PLS (CG policy) vs pn.cg per iteration, dense stored RBF kernel matrix "
        f"(ℓ = {LENGTHSCALE}, σ² = {NOISE}), float64, 1 RHS, equal iterations",
        [
            "n",
            "solver",
            "iters",
            "ms/iter",
            "÷ pn.cg",
            "final relres",
            "rel. error vs Cholesky",
            "factor memory [MiB]",
        ],
        rows,
    )
    if not args.quick:
        print("note: n = 20000 runs 250 iterations (not 500) to keep the script under ~4 minutes")
    for line in notes:
        print("note:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
