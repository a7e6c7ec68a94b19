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

__all__ = ["ESS_LIMIT", "PSRF_LIMIT", "add_sample_parser", "convergence_warnings", "run_sample"]

#: A parameter counts as not converged above this PSRF (Gelman–Rubin) ...
PSRF_LIMIT = 1.1
#: ... or below this bulk effective sample size.
ESS_LIMIT = 100.0


def add_sample_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``sample`` subcommand (its options are part of the public contract)."""
    from ..gp.bayes import GRADIENTS, SAMPLERS, ChainConfig
    from .fit_args import add_data_arguments
    from .main import add_backend_arguments, nonnegative_int, positive_float, positive_int

    defaults = ChainConfig()

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
    add_data_arguments(sample)
    sample.add_argument("--sampler", choices=SAMPLERS, default="sgld", help="sampler")
    sample.add_argument(
        "--gradient",
        choices=GRADIENTS,
        default=None,
        help="SGLD's gradient estimate (none: ulisse); --sampler mh uses the exact "
        "likelihood and takes none",
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
        "--subset",
        type=positive_int,
        default=None,
        help="points of the MAP/Laplace fit (none: 500, or all rows when fewer)",
    )
    sample.add_argument(
        "--q",
        type=positive_float,
        default=None,
        help="ULISSE's early threshold α = q√n on the residual (default 0.01: a relative "
        "residual of 1 %% for Rademacher probes; Filippone & Engler 2015 sample with q = 1 "
        "and q = 0.1, which gave chains that disagree, PSRF 5–25 on concrete)",
    )
    sample.add_argument(
        "--num-probes",
        type=positive_int,
        default=defaults.num_probes,
        help="Rademacher probes of SGLD's trace estimate (the paper's 4 left the chains "
        "20–70 %% wider than exact MH)",
    )
    sample.add_argument(
        "--preconditioner-rank",
        type=nonnegative_int,
        default=defaults.preconditioner_rank,
        help="pivots of the gradient's pivoted-Cholesky preconditioner (0: plain CG, as in "
        "the paper)",
    )
    sample.add_argument(
        "--beta",
        type=positive_float,
        default=defaults.beta,
        help="ULISSE's roulette rate β (Filippone & Engler 2015 use 1)",
    )
    sample.add_argument(
        "--freeze",
        type=positive_float,
        default=defaults.freeze_threshold,
        help="step-freezing threshold (Filippone & Engler 2015, eq. 7): SGLD's step size "
        "freezes once the gradient noise is below this share of the injected noise (their "
        "0.002 froze the chains at steps too small to mix in 10 000 iterations; the share "
        "widens the draws by about √(1 + share))",
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
    from .main import UsageError, config_from_arguments

    if not str(args.out).endswith(".npz"):
        raise UsageError(f"--out must name a .npz file, got {args.out!r}")
    # by name: --sampler, --gradient, --iterations, --step-start/-end, --subset, --beta, --backend
    if args.sampler == "mh" and args.gradient is not None:
        raise UsageError(
            f"--gradient {args.gradient} sets SGLD's gradient; --sampler mh evaluates the "
            "exact likelihood and takes no gradient: leave --gradient out"
        )
    config = config_from_arguments(
        ChainConfig, args, flags={"freeze_threshold": "--freeze"}, freeze_threshold=args.freeze,
        gradient=args.gradient or "ulisse", subset=args.subset or ChainConfig.subset,
    )  # fmt: skip
    ds, X, y = _rows(args)
    if args.subset is not None and args.subset > X.shape[0]:
        print(
            f"warning: --subset {args.subset} is more than the {X.shape[0]} training rows: "
            f"the MAP/Laplace fit uses all {X.shape[0]}"
        )
    if args.q is not None:
        config = dataclasses.replace(config, alpha=args.q * math.sqrt(X.shape[0]))
    print(
        f"{ds.name}: n = {X.shape[0]} training rows, d = {X.shape[1]}; {args.sampler}"
        + (f" with {config.gradient} gradients" if args.sampler == "sgld" else "")
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


def convergence_warnings(rows: list, *, chains: int) -> list[str]:
    """Why the draws of ``rows`` (``ParameterSummary`` per parameter) are not yet usable.

    Parameters
    ----------
    rows
        One summary per parameter (``name``, ``psrf``, ``ess``).
    chains
        Number of chains (the PSRF needs two).

    Returns
    -------
    list of str
        One line per parameter whose PSRF exceeds :data:`PSRF_LIMIT` or whose bulk ESS
        is below :data:`ESS_LIMIT`, and one line when a single chain leaves the PSRF
        undefined; empty when every parameter passes.
    """
    lines = []
    if chains < 2:
        lines.append(
            "PSRF is nan: it compares chains and there is one (--chains 1); convergence "
            "across chains is not checked (run --chains 2 or more)"
        )
    for r in rows:
        why = []
        if chains >= 2 and not r.psrf <= PSRF_LIMIT:
            why.append(f"PSRF {r.psrf:.3f} > {PSRF_LIMIT} (the chains disagree)")
        if not r.ess >= ESS_LIMIT:
            why.append(f"bulk ESS {r.ess:.1f} < {ESS_LIMIT:.0f}")
        if why:
            lines.append(f"{r.name} is not converged: {'; '.join(why)}; run more --iterations")
    return lines


def _report(out, wall: float, mcmc_summary) -> None:
    """Per parameter: posterior mean, sd, PSRF, ESS; then time per effective sample."""
    rows = mcmc_summary(out.samples, list(out.names))
    print(f"kept {out.samples.shape[1]} draws per chain (from iteration {out.start})")
    print(f"{'parameter':<12} {'mean':>9} {'sd':>9} {'PSRF':>7} {'ESS':>9}")
    for r in rows:
        print(f"{r.name:<12} {r.mean:9.4f} {r.sd:9.4f} {r.psrf:7.3f} {r.ess:9.1f}")
    for line in convergence_warnings(rows, chains=out.samples.shape[0]):
        print(f"warning: {line}")
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
