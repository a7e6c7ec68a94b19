"""Mixed-precision CG: float32 products, float64 answers, against float64 CG.

``pn.cg(A, b, rtol=1e-10, precision="mixed")`` against ``pn.cg(A, b, rtol=1e-10)`` on
the same SPD kernel systems (RBF Gram of 3-d Gaussian points plus noise), side by side:

- a dense stored ``K`` (n = 10 000; ``--quick``: 2 000), float32 copy made once per solve
  (its cost is inside the timing), κ about 1e3;
- a matrix-free chunked kernel operator plus noise (n = 20 000; ``--quick``: 4 000),
  κ about 40;
- a dense ``K`` beyond the mixed-precision condition limit (κ about 1e6, n = 5 000), where
  the run falls back to full-precision products (with a warning): the figure there is
  the fallback's overhead.

Reported: the Lanczos estimate of κ (80 steps), iterations and true-residual products
(float64) of each run, time per solve, the speed-up (float64 time ÷ mixed time), the
ratio of one float64 product's time to one float32 product's (medians of 5 rounds of 3
products, measured after the solves), the *products-only speed-up* (the speed-up if
nothing but the products and the float32 copy cost time: ``products₆₄ · T₆₄ /
(iterations₃₂ · T₃₂ + checks₃₂ · T₆₄ + T_copy)``, where ``products₆₄`` includes the
float64 run's exit product; an estimate from products timed apart from the solves, so
this host's noise moves it by 10–20 %), the iteration ratio, and both final true
relative residuals ``‖b − Kx‖/‖b‖`` (computed afterwards in float64). Timing: the two
solves alternate (3 rounds for the dense system in range, 1 elsewhere) after a
10-iteration warm-up of each; medians. One torch thread and two give different
absolute times; the ratios are the figure. A second table (``_mixed_rounding.py``)
shows where the extra iterations of float32 products come from.

Usage: ``python benchmarks/bench_mixed_precision.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import interleaved_medians, load_average, print_table, ratio
from _mixed_rounding import rounding_rows

import pnsolve as pn

RTOL = 1e-10


def _points(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def dense_system(n: int, lengthscale: float, noise: float) -> pn.linops.Dense:
    """``K + noise·I`` stored densely (float64), RBF with ``lengthscale``."""
    X = _points(n)
    K = torch.cdist(X, X)
    K.square_().mul_(-0.5 / lengthscale**2).exp_()
    K.diagonal().add_(noise)
    return pn.linops.Dense(K, is_symmetric=True, is_psd=True)


def chunked_system(n: int, lengthscale: float, noise: float) -> pn.linops.LinearOperator:
    """``K + noise·I`` matrix-free (chunked tiles), RBF with ``lengthscale``."""
    k = pn.kernels.RBF(lengthscale=lengthscale).requires_grad_(False)
    return k.linop(_points(n), backend="chunked").add_diagonal(noise)


def condition_estimate(A: pn.linops.LinearOperator, b: torch.Tensor, steps: int = 80) -> float:
    """``λ_max / λ_min`` of the Lanczos tridiagonal after ``steps`` steps (from below)."""
    T = pn.lanczos(A, b, steps).T
    ritz = torch.linalg.eigvalsh(T)
    return float(ritz[-1] / ritz[0])


def run_case(label: str, A: pn.linops.LinearOperator, repeats: int) -> list[object]:
    n = A.shape[0]
    b = torch.randn(n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out: dict[str, tuple[torch.Tensor, pn.krylov.CGInfo]] = {}

    def full() -> None:
        out["full"] = pn.cg(A, b, rtol=RTOL, maxiter=20 * n)

    def mixed() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the fallback, reported below
            out["mixed"] = pn.cg(A, b, rtol=RTOL, maxiter=20 * n, precision="mixed")

    with torch.no_grad():
        kappa = condition_estimate(A, b)
        with warnings.catch_warnings():  # warm-up: the float32 copy, caches, threads
            warnings.simplefilter("ignore", RuntimeWarning)
            pn.cg(A, b, maxiter=10, precision="mixed")
            pn.cg(A, b, maxiter=10)
        times = interleaved_medians({"full": full, "mixed": mixed}, repeats, warmup=False)

        def relres(x: torch.Tensor) -> str:
            return f"{float(torch.linalg.vector_norm(b - A @ x) / b.norm()):.2e}"

        t64, t32, t_copy = product_times(A, b)

    (x64, i64), (x32, i32) = out["full"], out["mixed"]
    # the speed-up if nothing but products (and the float32 copy) cost time
    products_only = ratio(
        i64.products * t64,
        (i32.products - i32.true_residual_checks) * t32 + i32.true_residual_checks * t64 + t_copy,
    )
    return [
        label, n, f"{kappa:.2g}",
        f"{i64.iterations} / {i64.true_residual_checks}",
        f"{i32.iterations} / {i32.true_residual_checks}", i32.precision,
        f"{times['full']:.2f}", f"{times['mixed']:.2f}",
        ratio(times["full"], times["mixed"]), ratio(t64, t32),
        f"{products_only:.3g}" if i32.precision == "mixed" else "-",
        ratio(i32.iterations, i64.iterations), relres(x64), relres(x32),
    ]  # fmt: skip


def product_times(A: pn.linops.LinearOperator, b: torch.Tensor) -> tuple[float, float, float]:
    """Seconds per product with ``A`` and with its float32 copy, and per copy.

    Medians of 5 rounds; each round times 3 products back to back, as CG runs them.
    """
    low = pn.krylov.low_precision_products(A, "mixed")
    x = b.unsqueeze(-1)
    times = interleaved_medians(
        {
            "f64": lambda: [A.matmat(x) for _ in range(3)],
            "f32": lambda: [low.matmat(x) for _ in range(3)],
            "copy": lambda: pn.krylov.low_precision_products(A, "mixed"),
        },
        5,
    )
    return times["f64"] / 3, times["f32"] / 3, times["copy"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    args = parser.parse_args(argv)
    n_dense, n_beyond, n_free = (2000, 2000, 4000) if args.quick else (10000, 5000, 20000)
    # κ grows with n; the noise levels put the systems about κ ≈ 1e3 (dense), 40
    # (chunked) and 1e6 (beyond the limit: thousands of iterations, so a smaller n)
    plan = [
        ("dense, κ in range", dense_system(n_dense, 0.5, 0.5 * n_dense / 2000), 3),
        ("dense, κ beyond", dense_system(n_beyond, 2.0, 1e-3 * n_beyond / 2000), 1),
        ("chunked, κ in range", chunked_system(n_free, 0.3, 1.0), 1),
    ]
    rows = [run_case(label, A, r) for label, A, r in plan]
    n_study = 1000 if args.quick else 4000
    study = rounding_rows(dense_system(n_study, 0.5, 0.5 * n_study / 2000), RTOL)
    print_table(
        f"CG to rtol = {RTOL:g}: float64 products against precision='mixed' "
        f"(float32 products), one right-hand side; {load_average()}",
        ["system", "n", "κ", "f64 it / checks", "mixed it / checks", "ended",
         "f64 s", "mixed s", "speed-up", "f64÷f32 product", "products-only speed-up", "it ratio",
         "f64 relres", "mixed relres"],
        rows,
    )  # fmt: skip
    print_table(
        f"Where the extra iterations come from: CG to rtol = {RTOL:g} with products that keep "
        f"one rounding of a float32 product (dense, n = {n_study}; _mixed_rounding.py)",
        ["products", "iterations", "true residuals", "÷ float64 iterations"],
        study,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
