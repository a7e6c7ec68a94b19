"""CG cost per iteration: ``pn.cg`` against a bare matvec, GPyTorch's ``linear_cg`` and SciPy.

All solvers run on the same dense stored SPD kernel matrix (RBF Gram of 3-d points
plus noise, float64) with a single right-hand side, for the same fixed number of
iterations: the tolerance is set so that it cannot be reached (``rtol = atol = 0``;
``linear_cg`` gets ``tolerance=0``, which also disables its "at least 10 iterations"
rule), so every solver does exactly ``iters`` CG iterations. ``pn.cg``'s count of
products includes its one exit product that records the true residual.

Timing: the four runs (``iters`` bare matvecs ``K @ b``, ``pn.cg``, ``linear_cg``,
``scipy.cg``) are interleaved round-robin, after one warm-up round, and the median
over rounds is taken, so drift on a shared machine hits them alike.

Reported: time per iteration ÷ bare matvec (target ≤ 1.05 for ``pn.cg``), ``pn.cg``
time ÷ each peer's, and each solver's final true relative residual ``‖b − Kx‖/‖b‖``
(computed afterwards, outside the timing). A fifth contender, ``as_linop(K)``, is
the conversion and NaN/Inf + symmetry check that ``pn.cg(K_tensor, b)`` runs before
its first iteration, reported in matvec equivalents (target ≤ 2).

``--products`` instead times ``Dense``'s product rule (``dense_matmat``) against
torch's ``A @ X`` for k = 1, 2, 4, 16 columns, n = 2 000 … 20 000, float32/float64
(the table in ``Dense``'s docstring). Every table ends with the load average.

Usage: ``python benchmarks/bench_cg.py [--quick] [--products]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import scipy.sparse.linalg as spla
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import interleaved_medians, load_average, print_table, ratio

import pnsolve as pn


def kernel_matrix(n: int, seed: int = 0) -> torch.Tensor:
    """RBF Gram matrix (lengthscale 0.5) of ``n`` uniform points in [0, 1]³ plus 0.1·I."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 3, generator=g, dtype=torch.float64)
    K = torch.cdist(X, X)
    K.square_().mul_(-0.5 / 0.5**2).exp_()
    K.diagonal().add_(0.1)
    return K


def run_size(n: int, iters: int, repeats: int) -> list[list[object]]:
    K = kernel_matrix(n)
    A = pn.linops.Dense(K, is_symmetric=True)
    b = torch.randn(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    K_np, b_np = K.numpy(), b.numpy()

    def relres(x: torch.Tensor) -> float:
        return float(torch.linalg.vector_norm(b - K @ x.reshape(-1)) / b.norm())

    out: dict[str, torch.Tensor] = {}

    def run_pn() -> None:
        out["pn.cg"], info = pn.cg(A, b, rtol=0.0, atol=0.0, maxiter=iters)
        assert info.iterations == iters

    def run_gpytorch() -> None:
        from linear_operator.utils.linear_cg import linear_cg

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["linear_cg"] = linear_cg(
                K.matmul, b.unsqueeze(-1), tolerance=0.0, max_iter=iters, max_tridiag_iter=0
            )

    def run_scipy() -> None:
        x, _ = spla.cg(K_np, b_np, rtol=0.0, atol=0.0, maxiter=iters)
        out["scipy.cg"] = torch.from_numpy(x)

    def run_matvecs() -> None:
        for _ in range(iters):
            K @ b

    def run_check() -> None:
        for _ in range(CHECKS):
            pn.linops.as_linop(K, name="A")

    # Round-robin over the solvers, so drift on a shared machine hits them alike.
    fns = {
        "matvec": run_matvecs,
        "check": run_check,
        "pn.cg": run_pn,
        "linear_cg": run_gpytorch,
        "scipy.cg": run_scipy,
    }
    times = interleaved_medians(fns, repeats)
    t_mv = times.pop("matvec") / iters
    t_check = times.pop("check") / CHECKS
    rows = [
        [n, "matvec K @ b", "-", f"{t_mv * 1e3:.2f}", 1.0, "-", "-"],
        [n, "as_linop(K) check", "-", f"{t_check * 1e3:.2f}", ratio(t_check, t_mv), "-", "-"],
    ]
    for name, t in times.items():
        per_iter = t / iters
        rows.append(
            [
                n,
                name,
                iters,
                f"{per_iter * 1e3:.2f}",
                ratio(per_iter, t_mv),
                ratio(times["pn.cg"], t),
                f"{relres(out[name]):.2e}",
            ]
        )
    return rows


CHECKS = 5  # conversions + checks per timed round


def product_rows(n: int, dtype: torch.dtype, repeats: int) -> list[list[object]]:
    """``dense_matmat`` time ÷ torch's ``A @ X`` for k = 1, 2, 4, 16 (one matrix)."""
    from pnsolve.linops.dense import dense_matmat

    g = torch.Generator().manual_seed(n)
    A = torch.randn(n, n, generator=g, dtype=dtype)
    reps = max(2, int(4e8 / (n * n * A.element_size())))
    rows: list[list[object]] = []
    for k in (1, 2, 4, 16):
        X = torch.randn(n, k, generator=g, dtype=dtype)
        times = interleaved_medians(
            {
                "torch": lambda X=X: [A @ X for _ in range(reps)],
                "dense_matmat": lambda X=X: [dense_matmat(A, X) for _ in range(reps)],
            },
            repeats,
        )
        t_torch, t_fast = times["torch"] / reps, times["dense_matmat"] / reps
        rows.append(
            [
                str(dtype).removeprefix("torch."),
                n,
                k,
                f"{t_torch * 1e3:.2f}",
                f"{t_fast * 1e3:.2f}",
                ratio(t_fast, t_torch),
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--products", action="store_true", help="Dense's product rule only")
    args = parser.parse_args(argv)
    if args.products:
        sizes = [1000, 2000] if args.quick else [2000, 5000, 10000, 20000]
        prows: list[list[object]] = []
        for dtype in (torch.float32, torch.float64):
            for n in sizes:
                prows += product_rows(n, dtype, 3 if args.quick else 7)
        print_table(
            f"Dense products: dense_matmat vs torch A @ X ({load_average()})",
            ["dtype", "n", "k", "torch ms", "dense_matmat ms", "÷ torch"],
            prows,
        )
        return 0
    if args.quick:
        plan = [(1000, 50, 3), (2000, 50, 3)]
    else:
        # n = 2 000 (32 MB, in cache): NumPy's BLAS path of Dense, where pn.cg's own
        # per-iteration work shows against SciPy's
        plan = [(2000, 300, 4), (5000, 100, 4), (20000, 60, 2)]
    rows: list[list[object]] = []
    for n, iters, repeats in plan:
        rows += run_size(n, iters, repeats)
    print_table(
        "CG per iteration, dense stored kernel matrix, float64, 1 RHS, equal iterations "
        f"({load_average()})",
        ["n", "solver", "iters", "ms/iter", "÷ matvec", "pn.cg ÷ this", "final relres"],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
