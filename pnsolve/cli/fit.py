"""``pnsolve fit``: train GP hyperparameters and report test metrics.

``--method mll`` (the default) maximises the exact GP's marginal likelihood with
gradients from linear solves; ``--method cagp`` fits :class:`~pnsolve.gp.CaGP` by its
computation-aware ELBO (:mod:`pnsolve.cli.fit_cagp`).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

from .._core import random as rnd
from .fit_args import (
    CAGP_OPTIONS,
    METHODS,
    MLL_OPTIONS,
    SGD_DEFAULT_BUDGET,
    add_fit_parser,
)

__all__ = [
    "CAGP_OPTIONS",
    "METHODS",
    "MLL_OPTIONS",
    "SGD_DEFAULT_BUDGET",
    "add_fit_parser",
    "run_fit",
]


def _load(args: argparse.Namespace):
    from ..datasets import load_csv, load_uci

    if args.data is not None:
        path = Path(args.data)
        if not path.is_file():
            raise FileNotFoundError(f"--data {args.data!r}: no such file")
        return load_csv(path, test_fraction=args.test_fraction, split_seed=args.split)
    return load_uci(args.dataset, split=args.split, data_dir=args.data_dir)


def _write_log(log, path: str | Path) -> Path:
    """One CSV row per step (lengthscales joined by ``;``)."""
    import csv
    from dataclasses import asdict, fields

    from ..gp.training import StepRecord

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    names = [f.name for f in fields(StepRecord)]
    with out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(names)
        for record in log:
            row = asdict(record)
            row["lengthscale"] = ";".join(f"{v:.6g}" for v in record.lengthscale)
            writer.writerow([row[k] for k in names])
    return out


def run_fit(args: argparse.Namespace) -> int:
    """Run ``pnsolve fit`` with parsed arguments; returns the exit status.

    Ctrl-C prints one line saying how many steps the checkpoint holds and returns 130.

    Raises
    ------
    UsageError
        If an option of the other ``--method`` was given (named, with its value).
    """
    from .main import EXIT_INTERRUPTED, config_from_arguments

    _check_method_options(args)
    if args.method == "cagp":
        from .fit_cagp import run_cagp

        return run_cagp(args)
    budget = args.epochs_budget
    if args.solver == "sgd" and budget is None and args.sgd_lr is None:
        budget = SGD_DEFAULT_BUDGET
        print(
            f"note: SGD without --epochs-budget or --sgd-lr: using {budget:g} epochs per step "
            "(SGD to tolerance at the conservative default learning rate is very slow)"
        )
    from ..gp.training import TrainingConfig

    if args.lr is None:  # --lr's default is each method's own
        args.lr = TrainingConfig().lr
    if args.kernel is not None and "estimator" not in getattr(args, "given", {}):
        # pathwise needs random Fourier features: the standard estimator where there are none
        if not cli_kernel(args.kernel, 1).has_spectral_features:
            args.estimator = "standard"
    config = config_from_arguments(TrainingConfig, args, epochs_budget=budget)
    try:
        return _run(args, config)
    except KeyboardInterrupt:
        print(
            f"pnsolve fit: interrupted {_saved_steps(args.checkpoint, config.steps)}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def _check_method_options(args: argparse.Namespace) -> None:
    """Refuse the options given on the command line that the chosen ``--method`` ignores.

    Also reads ``--kernel`` once (for one input column) so that a bad expression is a
    usage error before any data are loaded.
    """
    from .main import UsageError

    if args.kernel is not None:
        try:
            cli_kernel(args.kernel, 1)
        except ValueError as e:
            raise UsageError(str(e)) from e
    given = getattr(args, "given", {})
    if args.method == "cagp":
        wrong = [given[name] for name in MLL_OPTIONS if name in given]
        what = (
            "how --method mll solves, estimates gradients or predicts; --method cagp fits "
            "CaGP by its ELBO without them"
        )
        other = "use --method mll"
    else:
        wrong = [given[name] for name in CAGP_OPTIONS if name in given]
        what = (
            f"CaGP's actions (--method cagp); --method {args.method} fits the exact GP "
            "without actions"
        )
        other = "add --method cagp"
    if wrong:
        one = len(wrong) == 1
        raise UsageError(
            f"{', '.join(wrong)} {'sets' if one else 'set'} {what}: leave "
            f"{'it' if one else 'them'} out, or {other}"
        )


def _saved_steps(checkpoint: str | None, steps: int, *, method: str = "mll") -> str:
    """Where an interrupted run stands: how many steps its checkpoint holds."""
    if checkpoint is None:
        return "(no --checkpoint given: nothing saved, a new run starts over)"
    if not Path(checkpoint).exists():
        return f"before the first step completed: nothing saved in {checkpoint}"
    try:  # the file, not a step counter: Ctrl-C may land between saving and counting
        done = _checkpoint_steps(checkpoint, method)
    except (ValueError, KeyError, KeyboardInterrupt):
        return f"(checkpoint in {checkpoint})"
    return (
        f"after {done} of {steps} steps; checkpoint {checkpoint} holds them: run the same "
        "command again to resume"
    )


def _checkpoint_steps(checkpoint: str, method: str) -> int:
    """The steps a checkpoint of ``--method`` holds; ``ValueError`` if it is unreadable."""
    if method == "cagp":
        from .._core.statefile import load_state

        return int(load_state(checkpoint, "cagp", "cagp-run")["steps_done"])
    from ..gp.training import load_checkpoint

    return len(load_checkpoint(checkpoint)["log"])


def _run(args: argparse.Namespace, config) -> int:
    """Load, train, predict and report; the outputs ``--log`` and ``--plot`` asked for."""
    from ..gp.training import predictive

    ds, X, y, gen = _training_rows(args)
    _announce(ds, X, config)
    t0 = time.perf_counter()
    result = _train(args, config, X, y, gen)
    train_s = time.perf_counter() - t0
    method = args.predict
    if method == "auto":
        method = "cholesky" if X.shape[0] <= 20000 else "pathwise"
    mean, var = predictive(result, X, y, ds.X_test, method=method, config=config, generator=gen)
    _report_fit(result, config)
    print(f"training time: {train_s:.1f} s; predictions: {method}")
    _report_test_metrics(mean, var, ds.y_test)
    lead = getattr(args, "lead", True)  # distributed: rank 0 writes
    if args.log is not None and lead:
        print(f"wrote {_write_log(result.log, args.log)}")
    if args.plot is not None and lead:
        from ..plotting import plot_training

        out = plot_training(
            {f"{config.solver}/{config.estimator}": result.log},
            args.plot,
            title=f"{ds.name}: {config.solver}, {config.estimator}",
            tol=config.tol,
        )
        print(f"wrote {out}")
    return 0


def _report_test_metrics(mean: torch.Tensor, var: torch.Tensor, y_test: torch.Tensor) -> None:
    """The test RMSE and test log-likelihood of the predictive ``N(mean, var)`` of ``y``."""
    from ..metrics import gaussian_log_likelihood, rmse

    test_rmse = rmse(mean, y_test)
    test_llh = gaussian_log_likelihood(mean, var, y_test)
    if not (math.isfinite(test_rmse) and math.isfinite(test_llh)):
        raise ArithmeticError("non-finite test metrics")
    print(f"test RMSE: {test_rmse:.4f}")
    print(f"test log-likelihood: {test_llh:.4f}")


def _training_rows(args: argparse.Namespace):
    """The data set, its (subsampled) training rows and the run's generator."""
    ds = _load(args)
    X, y = ds.X_train, ds.y_train
    gen = torch.Generator(device="cpu").manual_seed(args.seed)  # seeded: same run everywhere
    if args.subsample is not None and args.subsample < X.shape[0]:
        idx = rnd.randperm(X.shape[0], generator=gen, device=X.device)[: args.subsample]
        X, y = X[idx], y[idx]
    return ds, X, y, gen


def _announce(ds, X: torch.Tensor, config) -> None:
    """The run's one-line header: data, sizes and training settings."""
    n, d = X.shape
    budget = (
        ""
        if config.epochs_budget is None
        else f", ≤ {config.epochs_budget:g} solver epochs/step (set-up epochs extra)"
    )
    print(
        f"pnsolve fit: {ds.name} split {ds.split}: n = {n} train, {ds.X_test.shape[0]} test, "
        f"d = {d}; solver {config.solver}, estimator {config.estimator}, "
        f"{'warm' if config.warm_start else 'cold'} start, {config.steps} steps{budget}",
        flush=True,
    )


def _train(args: argparse.Namespace, config, X: torch.Tensor, y: torch.Tensor, gen):
    """``train_hyperparameters`` with the CLI's checkpoint, progress bar and run identity."""
    from ..gp.training import train_hyperparameters

    def resumed(steps_done: int) -> None:
        print(
            f"resuming from checkpoint {args.checkpoint} after step {steps_done} of {config.steps}"
            + (" (all steps done)" if steps_done >= config.steps else ""),
            flush=True,
        )

    kernel = None if args.kernel is None else cli_kernel(args.kernel, X.shape[1])
    return train_hyperparameters(
        X,
        y,
        config,
        kernel=kernel,
        generator=gen,
        checkpoint=args.checkpoint,
        progress=not args.no_progress,
        on_resume=resumed,
        run_info={
            "seed": args.seed,
            "split": args.split,
            "test_fraction": args.test_fraction if args.data is not None else None,
            "subsample": args.subsample,
        },
    )


def _report_hyperparameters(kernel, noise: float) -> None:
    """The learned noise variance and the kernel's values (scale and lengthscale range)."""
    from ..kernels import StationaryKernel

    if not isinstance(kernel, StationaryKernel):
        from ..gp.training.summary import named_values

        values = ", ".join(f"{name} {_range(v)}" for name, v in named_values(kernel))
        print(f"hyperparameters: noise {noise:.4g}, kernel {kernel!r}: {values}")
        return
    ls = kernel.lengthscale.detach().reshape(-1)
    print(
        f"hyperparameters: noise {noise:.4g}, outputscale "
        f"{float(kernel.outputscale.detach()):.4g}, lengthscales {ls.min():.3g}..{ls.max():.3g}"
    )


def _range(values: tuple[float, ...]) -> str:
    return f"{values[0]:.4g}" if len(values) == 1 else f"{min(values):.3g}..{max(values):.3g}"


def cli_kernel(text: str, d: int):
    """``--kernel``'s expression as a kernel for ``d`` input columns (errors name the option)."""
    from ..kernels import from_expression

    try:
        return from_expression(text, d)
    except ValueError as e:
        raise ValueError(f"--kernel: {e}") from e


def _report_fit(result, config) -> None:
    """The fitted hyperparameters, the solver's epochs and any skipped steps."""
    _report_hyperparameters(result.kernel, result.noise)
    last = result.log[-1] if result.log else None
    if last is not None and config.solver != "cholesky":
        setup = sum(r.setup_epochs for r in result.log)
        print(
            f"solver: {result.total_epochs - setup:.1f} solver + {setup:.1f} set-up epochs in "
            f"all; last step residual mean {last.residual_norm_mean:.2e}, probes "
            f"{last.residual_norm_probes:.2e}"
        )
    skipped = sum(r.skipped for r in result.log)
    if skipped:
        print(
            f"warning: {skipped} step(s) skipped their update: the solve stopped with a "
            "relative residual above 1 (raise --epochs-budget or lower --sgd-lr)"
        )
