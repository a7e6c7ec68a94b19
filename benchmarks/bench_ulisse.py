"""ULISSE: iterations saved against CG, and the variance paid for them.

Problem: ``pn.problems.exponential_decay(n, cond=1e4)`` (float64, ``b = A x*``),
the ill-conditioned regime of the paper's Fig. 3. Baseline: ``pn.cg`` to
``rtol = 1e-8`` (the paper's ε). For each ``(alpha, beta)`` setting, ``draws``
independent ULISSE estimates are computed in one call (``b`` repeated as columns,
each column with its own roulette). ``alpha`` is given relative to ``‖b‖`` here
(ULISSE's ``alpha`` itself is absolute, as in the paper).

Reported per setting:

- ``iters ratio``: mean ULISSE steps per draw ÷ CG steps to 1e-8 (target ≤ 0.2);
- ``trCov``: trace of the sample covariance ÷ ‖x*‖², ``E v̂``: the mean of the
  one-run unbiased variance estimates (``info.variance_estimates``) ÷ ‖x*‖², and
  ``exact trCov``: the true ``E‖x̃ − x*‖²/‖x*‖²`` from CG's error norms
  (:func:`pnsolve.randomized.ulisse_variance`, summed over the CG steps to rtol
  1e-12: a lower bound, as every term is non-negative);
- ``mean err``: ‖sample mean − x*‖/‖x*‖ next to ``noise``: √(trCov/draws), what the
  error of the mean would be if the sample variance were the true one.

The variance is finite only while CG increments shrink faster than
``∏ w_r`` grows. At κ = 1e4 they do not, and ``mean err ≫ noise``: the sample mean
looks biased because the rare long runs that carry the mass are never drawn (the
exact variance is astronomically large while the sample one looks modest). A
control problem with 10 distinct eigenvalues (CG ends after 10 steps, every moment
finite) shows ``mean err ≈ noise`` where the exact variance is moderate (small β).

Usage: ``python benchmarks/bench_ulisse.py [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import print_table, ratio

import pnsolve as pn

SETTINGS = [(1e-1, 1.0), (1e-2, 0.1), (1e-2, 1.0), (1e-3, 0.1), (1e-3, 1.0)]
CONTROL_SETTINGS = [(1e-1, 0.1), (1e-1, 1.0), (1e-2, 0.3)]


def cg_error_norms(problem: pn.problems.LinearSystem) -> torch.Tensor:
    """``‖x* − x_i‖`` along plain CG, run to ``rtol = 1e-12``."""
    errors = [float(problem.x_true.norm())]
    pn.cg(problem.A, problem.b, rtol=1e-12,
          callback=lambda x: errors.append(float((problem.x_true - x).norm())))  # fmt: skip
    return torch.tensor(errors, dtype=torch.float64)


def run_settings(
    problem: pn.problems.LinearSystem,
    settings: list[tuple[float, float]],
    draws: int,
    cg_iters: int,
    seed: int,
) -> list[list[object]]:
    """One table row per ``(alpha/‖b‖, beta)``: iterations, variance, error of the mean."""
    A, b, xs = problem.A, problem.b, problem.x_true
    errors = cg_error_norms(problem)
    B = b[:, None].expand(-1, draws).contiguous()
    xnorm2 = float(xs.square().sum())
    rows = []
    for q, beta in settings:
        g = torch.Generator().manual_seed(seed)
        t0 = time.perf_counter()
        X, info = pn.randomized.ulisse(A, B, alpha=q * float(b.norm()), beta=beta, generator=g)
        elapsed = time.perf_counter() - t0
        assert info.unbiased
        steps = (info.threshold_iterations + info.roulette_steps).double()
        mean = X.mean(dim=1)
        tr_cov = float((X - mean[:, None]).square().sum()) / (draws - 1) / xnorm2
        l = int(info.threshold_iterations[0])
        log_exact = pn.randomized.ulisse_variance(errors, l, beta, log10=True) - math.log10(xnorm2)
        rows.append(
            [
                q,
                beta,
                l,
                float(steps.mean()),
                ratio(float(steps.mean()), cg_iters),
                int(info.roulette_steps.max()),
                float(info.weights[-1]) if info.weights.numel() else 1.0,
                tr_cov,
                float(info.variance_estimates.mean()) / xnorm2,
                f"1e{log_exact:+.0f}" if abs(log_exact) >= 3 else f"{10**log_exact:.3g}",
                float((mean - xs).norm()) / math.sqrt(xnorm2),
                math.sqrt(tr_cov / draws),
                1e3 * elapsed / draws,
            ]
        )
    return rows


HEADER = [
    "alpha/‖b‖", "beta", "l", "mean iters", "iters ratio", "max J", "max W",
    "trCov", "E v̂", "exact trCov", "mean err", "noise", "ms/draw",
]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer draws, smaller n")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--draws", type=int, default=None)
    args = parser.parse_args()
    n = args.n or (400 if args.quick else 1000)
    draws = args.draws or (50 if args.quick else 200)
    problem = pn.problems.exponential_decay(n, cond=1e4, generator=torch.Generator().manual_seed(0))
    _, cg_info = pn.cg(problem.A, problem.b, rtol=1e-8)
    rows = run_settings(problem, SETTINGS, draws, cg_info.iterations, seed=1)
    worst = max(r[4] for r in rows)
    print_table(
        f"ULISSE vs CG(rtol=1e-8, {cg_info.iterations} iterations): "
        f"exponential_decay(n={n}, cond=1e4), {draws} draws",
        HEADER,
        rows,
    )
    control = pn.problems.clustered(n, clusters=10, generator=torch.Generator().manual_seed(0))
    _, ctl_info = pn.cg(control.A, control.b, rtol=1e-8)
    rows = run_settings(control, CONTROL_SETTINGS, draws, ctl_info.iterations, seed=1)
    print_table(
        f"Control: clustered(n={n}, clusters=10), CG(rtol=1e-8) {ctl_info.iterations} "
        f"iterations, {draws} draws (mean err ≈ noise where exact trCov is moderate)",
        HEADER,
        rows,
    )
    print(f"\nlargest iters ratio at cond=1e4: {worst:.3f} (target ≤ 0.2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
