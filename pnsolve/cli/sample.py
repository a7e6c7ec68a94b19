"""``pnsolve sample``: posterior samples of GP hyperparameters by SGLD (ULISSE) or MH."""

from __future__ import annotations

import argparse
import dataclasses
import math
import time
from pathlib import Path

import numpy as np
import torch

from .._core import random as rnd

__all__ = ["add_sample_parser", "run_sample"]


def add_sample_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``sample`` subcommand (its options are part of the public contract)."""
    from ..gp.bayes import GRADIENTS, SAMPLERS
    from .fit import _add_data_arguments
    from .main import add_backend_arguments, positive_float, positive_int

    sample = sub.add_parser(
        "sample",
        help="sample GP hyperparameters by SGLD with ULISSE gradients (or exact-likelihood MH)",
        description=(
            "Draw posterior samples of the hyperparameters (log σ, log τ, log λ) of the "
            "GP with covariance σ exp(−τ‖x − x'‖²) + λδ on standardised data (Filippone & "
            "Engler 2015): C chains in parallel processes started from N(MAP, M) of a "
            "Laplace fit on a 500-point subset. Prints the posterior mean, sd, PSRF and ESS "
            "per parameter and the time per effective sample; writes the kept draws "
            "(chains × draws × parameters, log space) to --out."
        ),
    )
    _add_data_arguments(sample)
    sample.add_argument("--sampler", choices=SAMPLERS, default="sgld", help="sampler")
    sample.add_argument(
        "--gradient", choices=GRADIENTS, default="ulisse", help="SGLD's gradient estimate"
    )
    sample.add_argument("--iterations", type=positive_int, required=True, help="steps per chain")
    sample.add_argument("--chains", type=positive_int, default=4, help="number of chains")
    sample.add_argument("--seed", type=int, default=0, help="seed of the run's generator")
    sample.add_argument("--out", required=True, help="output .npz (samples, names)")
    sample.add_argument("--plot", default=None, help="trace and running-mean plot (PNG)")
    sample.add_argument("--checkpoint", default=None, help="checkpoint path prefix (resumes)")
    sample.add_argument("--no-progress", action="store_true", help="no progress bar")
    sample.add_argument(
        "--processes", type=positive_int, default=None, help="worker processes (default: chains)"
    )
    sample.add_argument(
        "--step-start", type=positive_float, default=1e-1, help="SGLD's first step size"
    )
    sample.add_argument(
        "--step-end", type=positive_float, default=1e-4, help="SGLD's last step size"
    )
    sample.add_argument(
        "--subset", type=positive_int, default=500, help="points of the MAP/Laplace fit"
    )
    sample.add_argument(
        "--q",
        type=positive_float,
        default=0.1,
        help="ULISSE's early threshold α = q√n on the residual (Filippone & Engler 2015 "
        "sample with q = 1, which on concrete gave chains that disagree, PSRF 5–25; q = 0.1 "
        "is the other setting of their Fig. 3; docs/sgld.md has settings that mix faster)",
    )
    sample.add_argument(
        "--beta",
        type=positive_float,
        default=1.0,
        help="ULISSE's roulette rate β (Filippone & Engler 2015 use 1)",
    )
    sample.add_argument(
        "--freeze",
        type=positive_float,
        default=0.002,
        help="step-freezing threshold (Filippone & Engler 2015, eq. 7): SGLD's step size "
        "freezes once the gradient noise is below this share of the injected noise (their "
        "value: 0.002)",
    )
    add_backend_arguments(sample)
    sample.add_argument(
        "--predict-samples",
        type=int,
        default=50,
        help="θ samples in the test predictive (Filippone & Engler 2015, eq. 3) compared "
        "with type-II ML (0: skip)",
    )


def run_sample(args: argparse.Namespace) -> int:
    """Run ``pnsolve sample`` with parsed arguments; returns the exit status."""
    from ..gp.bayes import ChainConfig, sample_hyperparameters
    from ..metrics import mcmc_summary
    from .main import UsageError

    if not str(args.out).endswith(".npz"):
        raise UsageError(f"--out must name a .npz file, got {args.out!r}")
    try:
        config = ChainConfig(
            sampler=args.sampler,
            gradient=args.gradient,
            iterations=args.iterations,
            step_start=args.step_start,
            step_end=args.step_end,
            subset=args.subset,
            beta=args.beta,
            freeze_threshold=args.freeze,
            backend=args.backend,
        )
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from exc
    ds, X, y = _rows(args)
    config = dataclasses.replace(config, alpha=args.q * math.sqrt(X.shape[0]))
    print(
        f"{ds.name}: n = {X.shape[0]} training rows, d = {X.shape[1]}; {args.sampler}"
        + (f" with {args.gradient} gradients" if args.sampler == "sgld" else "")
        + f", {args.chains} chains × {args.iterations} iterations",
        flush=True,
    )
    bar = _progress(args, args.chains * args.iterations)
    t0 = time.perf_counter()
    try:
        out = sample_hyperparameters(
            X, y, config, chains=args.chains, generator=_seeded(args.seed),
            processes=args.processes, checkpoint=args.checkpoint,
            progress=None if bar is None else bar.update,
        )  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - t0
    for chain, message in out.dropped:
        print(f"warning: chain {chain} diverged and was dropped ({message.splitlines()[0]})")
    if not out.frozen:
        print(
            "warning: the SGLD step size did not freeze in every chain within the first half "
            "of the run (the gradient noise stayed above --freeze); keeping the second half "
            f"({out.samples.shape[1]} draws per chain): run more --iterations"
        )
    _report(out, wall, mcmc_summary)
    if args.predict_samples > 0:
        _predict(args, ds, X, y, out)
    if not getattr(args, "lead", True):  # distributed: rank 0 writes
        return 0
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = out.samples.detach().cpu().numpy()  # host round trip: written with NumPy
    np.savez(path, samples=samples, names=np.array(out.names, dtype=str))
    print(f"wrote {path}")
    if args.plot is not None:
        from ..plotting import plot_traces

        print(f"wrote {plot_traces(out.samples, list(out.names), args.plot)}")
    return 0


def _seeded(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed``: the same run whatever the data's device."""
    return torch.Generator(device="cpu").manual_seed(seed)


def _rows(args: argparse.Namespace):
    """The data set and its (subsampled) standardised training rows, float64."""
    from .fit import _load

    ds = _load(args)
    X, y = ds.X_train.to(torch.float64), ds.y_train.to(torch.float64)
    if args.subsample is not None and args.subsample < X.shape[0]:
        idx = rnd.randperm(X.shape[0], generator=_seeded(args.seed), device=X.device)
        idx = idx[: args.subsample].sort().values
        X, y = X[idx], y[idx]
    return ds, X, y


def _predict(args: argparse.Namespace, ds, X: torch.Tensor, y: torch.Tensor, out) -> None:
    """Test RMSE and log-likelihood: the predictive averaged over θ vs type-II ML."""
    from ..gp.bayes import LogHyperparameters, mixture_predictive, type_ii_maximum_likelihood
    from ..kernels import RBF
    from ..metrics import rmse

    params = LogHyperparameters(RBF(lengthscale=1.0), 0.1, parametrization="log_tau")
    Xs, ys = ds.X_test.to(torch.float64), ds.y_test.to(torch.float64)
    bayes = mixture_predictive(params, out.samples, X, y, Xs, max_samples=args.predict_samples)
    rows = [("posterior predictive", bayes, bayes.means.shape[0])]
    if X.shape[0] <= 5000:  # type-II ML by Cholesky
        theta = type_ii_maximum_likelihood(params, X, y, out.laplace.theta)
        rows.append(("type-II ML", mixture_predictive(params, theta[None], X, y, Xs), 1))
    print(f"{'test predictive':<22} {'θ samples':>9} {'RMSE':>8} {'log-lik':>9}")
    for name, pred, count in rows:
        print(f"{name:<22} {count:9d} {rmse(pred.mean, ys):8.4f} {pred.log_likelihood(ys):9.4f}")


def _progress(args: argparse.Namespace, total: int):
    if args.no_progress or not getattr(args, "lead", True):
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="sampling", unit="it", smoothing=0.05)


def _report(out, wall: float, mcmc_summary) -> None:
    """Per parameter: posterior mean, sd, PSRF, ESS; then time per effective sample."""
    rows = mcmc_summary(out.samples, list(out.names))
    print(f"kept {out.samples.shape[1]} draws per chain (from iteration {out.start})")
    print(f"{'parameter':<12} {'mean':>9} {'sd':>9} {'PSRF':>7} {'ESS':>9}")
    for r in rows:
        print(f"{r.name:<12} {r.mean:9.4f} {r.sd:9.4f} {r.psrf:7.3f} {r.ess:9.1f}")
    ess_min = min(r.ess for r in rows)
    chain_seconds = sum(out.seconds)
    per = chain_seconds / ess_min if ess_min > 0 and math.isfinite(ess_min) else math.inf
    print(
        f"time: {wall:.1f} s wall, {chain_seconds:.1f} s in chains; "
        f"{per:.3g} chain-seconds per effective sample (smallest ESS)"
    )
    if out.acceptance and not math.isnan(out.acceptance[0]):
        rates = ", ".join(f"{a:.2f}" for a in out.acceptance)
        print(f"MH acceptance after burn-in: {rates}")
