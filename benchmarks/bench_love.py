"""LOVE predictive variances: ``pn.gp.LoveCache`` against exact Cholesky variances and GPyTorch.

Problem: ``n`` training and ``t`` test points uniform in [0, 1]³, RBF kernel
(lengthscale 0.3, outputscale 1), noise variance 0.01, float64, zero prior mean.

- **exact**: ``pn.gp.ExactGP(kernel, noise).fit(X, y)``, then ``.posterior(Xs).var``
  (cross-covariance, mean and a triangular solve with ``t`` right-hand sides). Timed
  after the fit, once per size (it is the slow side). Also timed: the variance part
  alone, ``L⁻¹ k(X, Xs)`` given the cross-covariance.
- **LOVE**: for each rank ``k``, precomputation = ``K̂ = K + σ² I``, probe
  ``k(X, Xs)`` averaged over the test points (``gp.posterior(Xs, method="love")``'s
  default) and ``pn.gp.LoveCache.build(K̂, probe, k)``, timed once. After it, the
  per-test-point work is timed: ``cache.variance(k(X, Xs), k(x, x))`` alone
  ("var only", against the exact variance part), and end to end with the
  cross-covariance and the mean ("predict", against ``.posterior(Xs).var`` and
  against GPyTorch, whose timed call does the same work).
- **gpytorch**: ``ExactGP`` model (``ZeroMean``, ``RBFKernel`` with the same lengthscale,
  ``GaussianLikelihood`` with the same fixed noise), float64, eval mode, under
  ``fast_pred_var()`` and ``max_root_decomposition_size(k)``. The first
  ``model(Xs).variance`` call builds its caches (reported as its precomputation); the
  timed calls come after.

Errors (both methods against the Cholesky variances): SMAE =
``mean|var − var_exact| / mean var_exact`` and the max relative error
``max |var − var_exact| / var_exact``.

Target (issue 4 item 8): LOVE ≥ 100× faster than the exact variances after precomputation.

Usage: ``python benchmarks/bench_love.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import print_table, ratio, timeit

import pnsolve as pn

LENGTHSCALE = 0.3
NOISE = 0.01
DTYPE = torch.float64


def once(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall time of a single ``fn()`` call and its result."""
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def errors(var: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """``(SMAE, max relative error)`` of ``var`` against ``ref``."""
    diff = (var - ref).abs()
    return float(diff.mean() / ref.mean()), float((diff / ref).max())


def problem(n: int, t: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 3, generator=g, dtype=DTYPE)
    Xs = torch.rand(t, 3, generator=g, dtype=DTYPE)
    y = torch.sin(6 * X).sum(-1) + NOISE**0.5 * torch.randn(n, generator=g, dtype=DTYPE)
    return X, y, Xs


def gpytorch_runs(
    X: torch.Tensor, y: torch.Tensor, Xs: torch.Tensor, ranks: tuple[int, ...], repeats: int
) -> dict[int, tuple[float, float, torch.Tensor]]:
    """Per rank: (first-call time, median later-call time, variances) of GPyTorch's LOVE."""
    import gpytorch

    class Model(gpytorch.models.ExactGP):
        def __init__(self, X: torch.Tensor, y: torch.Tensor, lik: Any) -> None:
            super().__init__(X, y, lik)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.RBFKernel()

        def forward(self, x: torch.Tensor) -> Any:
            return gpytorch.distributions.MultivariateNormal(
                self.mean_module(x), self.covar_module(x)
            )

    out = {}
    for k in ranks:
        torch.manual_seed(0)
        lik = gpytorch.likelihoods.GaussianLikelihood().to(DTYPE)
        lik.noise = NOISE
        model = Model(X, y, lik).to(DTYPE)
        model.covar_module.lengthscale = LENGTHSCALE
        model.eval()
        lik.eval()

        def predict(model: Any = model) -> torch.Tensor:
            return model(Xs).variance

        with (
            torch.no_grad(),
            warnings.catch_warnings(),
            gpytorch.settings.fast_pred_var(),
            gpytorch.settings.max_root_decomposition_size(k),
        ):
            warnings.simplefilter("ignore")
            t_first, _ = once(predict)
            t_pred = timeit(predict, repeats=repeats, warmup=0)
            var = predict().detach().clone()
        out[k] = (t_first, t_pred, var)
        del model, lik
        gc.collect()
    return out


def run_size(
    n: int, t: int, ranks: tuple[int, ...], repeats: int
) -> tuple[list[list[object]], list[list[object]], str | None]:
    X, y, Xs = problem(n, t)
    kernel = pn.kernels.RBF(lengthscale=LENGTHSCALE)
    gp = pn.gp.ExactGP(kernel, NOISE)
    t_fit, _ = once(lambda: gp.fit(X, y))

    # Exact: end to end (the public call), then the variance part alone.
    t_exact, var_exact = once(lambda: gp.posterior(Xs).var)
    with torch.no_grad():
        Kxs = kernel(Xs, X)  # (t, n)
        KxsT = Kxs.mT
        prior_var = kernel.diag(Xs)

    def exact_var_only() -> torch.Tensor:
        W = torch.linalg.solve_triangular(gp.L, KxsT, upper=False)
        return prior_var - (W * W).sum(0)

    with torch.no_grad():
        t_exact_v, var_exact_v = once(exact_var_only)
    assert torch.allclose(var_exact_v, var_exact, rtol=1e-8, atol=1e-12)
    del var_exact_v
    gc.collect()

    peer_note = None
    try:
        peer = gpytorch_runs(X, y, Xs, ranks, repeats)
    except Exception as exc:  # the peer is optional
        peer, peer_note = {}, f"gpytorch peer skipped: {type(exc).__name__}: {exc}"

    rows_pn: list[list[object]] = [
        [
            n,
            t,
            "exact (Cholesky)",
            "-",
            f"{t_fit:.2f} (fit)",
            f"{t_exact_v:.3f}",
            f"{t_exact:.3f}",
            1.0,
            1.0,
            0.0,
            0.0,
        ]
    ]
    rows_peer: list[list[object]] = []
    with torch.no_grad():
        for k in ranks:

            def build(k: int = k) -> Any:
                A = kernel(X) + NOISE * torch.eye(n, dtype=DTYPE)
                return pn.gp.LoveCache.build(A, KxsT.mean(1), k)

            t_pre, cache = once(build)

            def love_var_only(cache: Any = cache) -> torch.Tensor:
                return cache.variance(KxsT, prior_var)

            def love_predict(cache: Any = cache) -> torch.Tensor:
                C = kernel(Xs, X)
                C @ gp.weights  # the mean, as in posterior()/GPyTorch's call
                return cache.variance(C.mT, kernel.diag(Xs))

            t_v = timeit(love_var_only, repeats=repeats)
            t_p = timeit(love_predict, repeats=repeats)
            var = love_var_only()
            smae, maxrel = errors(var, var_exact)
            rows_pn.append(
                [
                    n,
                    t,
                    f"LOVE k={cache.rank}",
                    f"{t_pre:.2f}",
                    "-",
                    f"{t_v * 1e3:.1f} ms",
                    f"{t_p * 1e3:.1f} ms",
                    ratio(t_exact_v, t_v),
                    ratio(t_exact, t_p),
                    f"{smae:.2e}",
                    f"{maxrel:.2e}",
                ]
            )
            del cache
            gc.collect()
            if k in peer:
                g_first, g_pred, g_var = peer[k]
                g_smae, g_maxrel = errors(g_var, var_exact)
                rows_peer.append(
                    [
                        n,
                        t,
                        k,
                        f"{t_p * 1e3:.1f}",
                        f"{g_pred * 1e3:.1f}",
                        ratio(t_p, g_pred),
                        f"{t_pre:.2f}",
                        f"{g_first:.2f}",
                        f"{smae:.2e}",
                        f"{g_smae:.2e}",
                        f"{maxrel:.2e}",
                        f"{g_maxrel:.2e}",
                    ]
                )
    return rows_pn, rows_peer, peer_note


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    args = parser.parse_args(argv)
    ranks = (25, 50, 100)
    plan = [(2000, 2000, 3)] if args.quick else [(10_000, 10_000, 3)]
    rows_pn: list[list[object]] = []
    rows_peer: list[list[object]] = []
    notes: list[str] = []
    for n, t, repeats in plan:
        a, b, note = run_size(n, t, ranks, repeats)
        rows_pn += a
        rows_peer += b
        if note:
            notes.append(note)
    print_table(
        "LOVE vs exact Cholesky variances, RBF ℓ=0.3, noise 0.01, d=3, float64 "
        "(times after precomputation; speedup = exact ÷ LOVE)",
        [
            "n",
            "t",
            "method",
            "precompute s",
            "fit s",
            "var only",
            "predict",
            "speedup var",
            "speedup predict",
            "SMAE",
            "max rel err",
        ],
        rows_pn,
    )
    if rows_peer:
        print_table(
            "LOVE: pnsolve vs gpytorch fast_pred_var (equal rank; predict = cross-cov + mean "
            "+ var, after caches; errors vs Cholesky)",
            [
                "n",
                "t",
                "k",
                "pn ms",
                "gpytorch ms",
                "pn ÷ gpytorch",
                "pn precompute s",
                "gpytorch 1st call s",
                "pn SMAE",
                "gpytorch SMAE",
                "pn max rel",
                "gpytorch max rel",
            ],
            rows_peer,
        )
    for note in notes:
        print(f"\nnote: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
