"""Calibration of solution beliefs per policy and prior: prints a markdown table.

For each policy × prior: draw ``x* ~ N(0, Σ₀)`` (inverse prior ``Σ₀ = A⁻¹``, general
prior ``Σ₀ = σ² I``), set ``b = A x*``, run ``i < n`` iterations and compute the
whitened squared error ``eᵀ Σ_i⁺ e`` of ``e = x* − x_i``; under a calibrated belief it
is ``χ²(rank Σ_i)``. The table gives the mean over the draws divided by the rank
(1 when calibrated), the z-score of the mean, and whether ``|z|`` stays below the
two-sided threshold at false-alarm level ``FALSE_ALARM``.

The same computation as ``tests/statistical/test_calibration.py``
(:func:`pnsolve.testing.calibration.whitened_error_statistics`). Runs in well under a
minute on 2 cores. Usage: ``python benchmarks/calibration_table.py``.
"""

from __future__ import annotations

import torch

import pnsolve as pn
from pnsolve.problems import make_problem
from pnsolve.testing import statistical_threshold
from pnsolve.testing.calibration import whitened_error_statistics

N, ITERATIONS, DRAWS, SEED = 30, 10, 200, 0
COND = 1e2
SIGMA2 = 1.0
FALSE_ALARM = 1e-3

POLICIES = {
    "UnitVector (sequential)": pn.policies.UnitVector,
    "Random (Gaussian)": pn.policies.Random,
    "CG": pn.policies.CG,
}
PRIORS = {"inverse (Σ₀ = A⁻¹)": "inverse", f"σ²I (σ² = {SIGMA2:g})": SIGMA2}


def main() -> None:
    torch.set_num_threads(1)
    A = make_problem("exponential", N, generator=torch.Generator().manual_seed(SEED), cond=COND).A
    threshold = statistical_threshold(FALSE_ALARM)
    print(
        f"n = {N}, exponential spectrum (cond {COND:g}), {ITERATIONS} iterations, "
        f"{DRAWS} draws, seed {SEED}; calibrated ⇔ |z| ≤ {threshold:.2f} "
        f"(false alarm {FALSE_ALARM:g}).\n"
    )
    print("| policy | prior | mean eᵀΣ⁺e | rank Σ_i | mean / rank | z | calibrated |")
    print("|---|---|---|---|---|---|---|")
    for pname, make in POLICIES.items():
        for prior_name, prior in PRIORS.items():
            res = whitened_error_statistics(
                A, make(), prior, ITERATIONS, DRAWS, torch.Generator().manual_seed(SEED + 1)
            )
            ok = "yes" if abs(res.z) <= threshold else "no"
            print(
                f"| {pname} | {prior_name} | {res.mean:.2f} | {res.rank} | {res.ratio:.3f} "
                f"| {res.z:+.1f} | {ok} |"
            )


if __name__ == "__main__":
    main()
