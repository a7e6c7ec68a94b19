"""Reference scikit-learn fit of the Mauna Loa CO2 kernel, for comparison with pnsolve.

Reproduces the fit of scikit-learn's example "Forecasting of CO2 level on Mona Loa
dataset using Gaussian process regression" on ``pnsolve.datasets.mauna_loa_co2()``
(521 monthly means, time as ``year + month / 12``): the target minus its mean, the
example's kernel (long-term trend + locally periodic seasonal term + rational
quadratic irregularities + correlated and white noise) and
``GaussianProcessRegressor(kernel=..., normalize_y=False)`` with its default optimiser
(L-BFGS-B, no restarts). Prints the learned kernel, its log marginal likelihood and the
fit time; ``--json PATH`` also writes them, with the learned hyperparameters by name.

Usage: ``python benchmarks/co2_sklearn_reference.py [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def co2_kernel() -> Any:
    """The example's kernel, with its initial hyperparameters and bounds."""
    from sklearn.gaussian_process.kernels import (
        RBF,
        ExpSineSquared,
        RationalQuadratic,
        WhiteKernel,
    )

    long_term_trend = 50.0**2 * RBF(length_scale=50.0)
    seasonal = (
        2.0**2
        * RBF(length_scale=100.0)
        * ExpSineSquared(length_scale=1.0, periodicity=1.0, periodicity_bounds="fixed")
    )
    irregularities = 0.5**2 * RationalQuadratic(length_scale=1.0, alpha=1.0)
    noise = 0.1**2 * RBF(length_scale=0.1) + WhiteKernel(
        noise_level=0.1**2, noise_level_bounds=(1e-5, 1e5)
    )
    return long_term_trend + seasonal + irregularities + noise


def learned_hyperparameters(kernel: Any) -> dict[str, float | list[float]]:
    """``exp(theta)`` of a fitted kernel, keyed by the free hyperparameters' names."""
    import numpy as np

    values = np.exp(kernel.theta)
    out: dict[str, float | list[float]] = {}
    i = 0
    for hp in kernel.hyperparameters:
        if hp.fixed:
            continue
        chunk = values[i : i + hp.n_elements]
        i += hp.n_elements
        out[hp.name] = float(chunk[0]) if hp.n_elements == 1 else [float(v) for v in chunk]
    return out


def fit_reference() -> dict[str, Any]:
    """Fit the example's GP on the shipped CO2 series; the results as a JSON-able dict."""
    import sklearn
    import torch
    from sklearn.gaussian_process import GaussianProcessRegressor

    import pnsolve as pn

    X_t, y_t = pn.datasets.mauna_loa_co2(dtype=torch.float64, device="cpu")
    X, y = X_t.numpy(), y_t.numpy()
    y_mean = float(y.mean())
    kernel = co2_kernel()
    gp = GaussianProcessRegressor(kernel=kernel, normalize_y=False)
    t0 = time.perf_counter()
    gp.fit(X, y - y_mean)
    fit_s = time.perf_counter() - t0
    return {
        "n": int(X.shape[0]),
        "y_mean": y_mean,
        "initial_kernel": str(kernel),
        "kernel": str(gp.kernel_),
        "log_marginal_likelihood": float(gp.log_marginal_likelihood_value_),
        "hyperparameters": learned_hyperparameters(gp.kernel_),
        "fit_seconds": fit_s,
        "sklearn_version": sklearn.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the reference fit, print it, and optionally write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    result = fit_reference()
    print(
        f"scikit-learn {result['sklearn_version']}, n = {result['n']}, "
        f"y_mean = {result['y_mean']:.4f} ppm"
    )
    print(f"initial kernel: {result['initial_kernel']}")
    print(f"learned kernel: {result['kernel']}")
    print(f"log marginal likelihood: {result['log_marginal_likelihood']:.4f}")
    print(f"fit time: {result['fit_seconds']:.2f} s")
    for name, value in result["hyperparameters"].items():
        print(f"  {name} = {value}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
