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

__all__ = [
    "CAGP_OPTIONS",
    "METHODS",
    "MLL_OPTIONS",
    "SGD_DEFAULT_BUDGET",
    "add_fit_parser",
    "run_fit",
]

#: Epochs per step for ``--solver sgd`` when neither a budget nor a learning rate is
#: given (the largest budget of the early-stopping study of Lin et al., 2024).
SGD_DEFAULT_BUDGET = 50.0

#: What ``pnsolve fit`` trains: the exact GP's marginal likelihood by linear solves, or
#: CaGP's computation-aware ELBO.
METHODS = ("mll", "cagp")
#: Options (by their argument names) that only ``--method mll`` reads ...
MLL_OPTIONS = (
    "solver", "estimator", "warm_start", "epochs_budget", "tol", "num_probes", "block_size",
    "batch_size", "sgd_lr", "predict",
)  # fmt: skip
#: ... and those that only ``--method cagp`` reads.
CAGP_OPTIONS = ("num_actions", "blocks")


class _RecordGiven(argparse.Action):
    """Mixin: note each option given on the command line in ``namespace.given``.

    ``given`` maps the argument's name to how it was written (``--solver cg``), so an
    option that does not apply to the chosen ``--method`` is refused by name even when
    its value is the default.
    """

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        super().__call__(parser, namespace, values, option_string)
        flag = max(self.option_strings, key=len)
        written = flag if self.nargs == 0 else f"{flag} {values}"
        namespace.given = {**getattr(namespace, "given", {}), self.dest: written}


class _StoreGiven(_RecordGiven, argparse._StoreAction):
    """``action="store"`` that records the option as given."""


class _StoreTrueGiven(_RecordGiven, argparse._StoreTrueAction):
    """``action="store_true"`` that records the option as given."""


def add_fit_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``fit`` subcommand."""
    fit = sub.add_parser(
        "fit",
        help="fit Matérn-3/2 ARD hyperparameters with CG/AP/SGD and standard/pathwise "
        "gradients, or a CaGP by its ELBO",
        description=(
            "Fit the hyperparameters of a Matérn-3/2 ARD GP by Adam, then print the test "
            "RMSE and test log-likelihood (standardised targets). --method mll (the "
            "default) maximises the marginal likelihood with gradients from iterative "
            "linear solves (Lin et al., 2024); --method cagp fits a computation-aware GP "
            "(pn.gp.CaGP, Wenger et al., 2024) with --num-actions learned block-sparse "
            "actions by its ELBO, each step one pass over the kernel matrix, and also "
            "prints the final ELBO. With --checkpoint an interrupted run (Ctrl-C) resumes "
            "when the same command is run again."
        ),
    )
    # every option of fit records whether it was given (a default value counts as given)
    fit.register("action", None, _StoreGiven)
    fit.register("action", "store", _StoreGiven)
    fit.register("action", "store_true", _StoreTrueGiven)
    _add_data_arguments(fit)
    _add_training_arguments(fit)
    _add_cagp_arguments(fit)
    _add_output_arguments(fit)


def _add_data_arguments(fit: argparse.ArgumentParser) -> None:
    """``--data``/``--dataset`` and how the rows are split and subsampled."""
    from .main import int_at_least, nonnegative_int, open_fraction

    src = fit.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="CSV file (.csv or .csv.gz); the last column is the target")
    src.add_argument("--dataset", help="UCI dataset name, e.g. pol, elevators, bike")
    fit.add_argument(
        "--split", type=nonnegative_int, default=0, help="UCI split 0..9, or the CSV split seed"
    )
    fit.add_argument(
        "--data-dir", default=None, help="folder with UCI datasets (none: the shipped data)"
    )
    fit.add_argument(
        "--test-fraction", type=open_fraction, default=0.1, help="test part of a --data CSV"
    )
    fit.add_argument(
        "--subsample",
        type=int_at_least(2),
        default=None,
        help="use this many random training rows, at least 2 (none: all)",
    )


def _add_training_arguments(fit: argparse.ArgumentParser) -> None:
    """Method, solver, estimator, Adam and the solvers' own settings (TrainingConfig's)."""
    from ..gp.training import ESTIMATORS, SOLVERS
    from .main import add_backend_arguments, nonnegative_int, positive_float, positive_int

    fit.add_argument(
        "--method",
        choices=METHODS,
        default="mll",
        help="mll: the exact GP's marginal likelihood, gradients by --solver and "
        "--estimator; cagp: a computation-aware GP (pn.gp.CaGP) by its ELBO, with "
        "--num-actions and --blocks",
    )
    fit.add_argument("--solver", choices=SOLVERS, default="cg", help="--method mll's linear solver")
    fit.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default="pathwise",
        help="--method mll's gradient estimator",
    )
    fit.add_argument(
        "--warm-start",
        action="store_true",
        help="--method mll: start each solve at the previous step's solutions, with fixed probes",
    )
    fit.add_argument("--steps", type=positive_int, default=100, help="Adam steps")
    fit.add_argument("--lr", type=positive_float, default=0.1, help="Adam learning rate")
    fit.add_argument(
        "--epochs-budget",
        type=positive_float,
        default=None,
        help="--method mll: max solver epochs per step, set-up work not counted (none: solve "
        f"to --tol; with --solver sgd and no --sgd-lr: {SGD_DEFAULT_BUDGET:g})",
    )
    fit.add_argument(
        "--tol", type=positive_float, default=0.01, help="--method mll: relative residual tolerance"
    )
    fit.add_argument(
        "--num-probes",
        type=positive_int,
        default=64,
        help="--method mll: probe vectors of the estimator",
    )
    fit.add_argument(
        "--block-size",
        type=positive_int,
        default=1000,
        help="--method mll: alternating-projections block size",
    )
    fit.add_argument(
        "--batch-size", type=positive_int, default=500, help="--method mll: SGD minibatch size"
    )
    fit.add_argument(
        "--sgd-lr",
        type=positive_float,
        default=None,
        help="--method mll: SGD learning rate (none: the solver's default)",
    )
    fit.add_argument(
        "--init",
        choices=["constant", "heuristic"],
        default="constant",
        help="initial hyperparameters: all 1, or exact fits on nearest-neighbour subsets",
    )
    fit.add_argument(
        "--seed", type=nonnegative_int, default=0, help="seed of the run's torch.Generator"
    )
    add_backend_arguments(fit)


def _add_cagp_arguments(fit: argparse.ArgumentParser) -> None:
    """CaGP's own settings (``--method cagp``)."""
    from ..gp.cagp.actions import BLOCKS
    from .fit_cagp import DEFAULT_NUM_ACTIONS
    from .main import positive_int

    fit.add_argument(
        "--num-actions",
        type=positive_int,
        default=None,
        help="--method cagp: number of actions i, 1 ≤ i ≤ n training rows; each step costs "
        "one pass over the kernel matrix for K̂S (n × i) and O(n i² + i³) algebra (none: "
        f"{DEFAULT_NUM_ACTIONS}, or n when there are fewer rows)",
    )
    fit.add_argument(
        "--blocks",
        choices=BLOCKS,
        default="random",
        help="--method cagp: how the rows are split into one block per action, a random "
        "partition or k-means clusters of the inputs",
    )


def _add_output_arguments(fit: argparse.ArgumentParser) -> None:
    """Checkpoint, predictions, plot, log and progress bar."""
    fit.add_argument(
        "--checkpoint",
        default=None,
        help="checkpoint file, written after every step; an existing one of the same run "
        "is resumed (none: no checkpoint)",
    )
    fit.add_argument(
        "--predict",
        choices=["auto", "cholesky", "pathwise"],
        default="auto",
        help="--method mll's test predictions: exact Cholesky, pathwise samples, or auto "
        "(Cholesky up to n = 20000); cagp predicts with its own posterior",
    )
    fit.add_argument(
        "--plot", default=None, help="write the training curves to this PNG (none: no plot)"
    )
    fit.add_argument(
        "--log", default=None, help="write the per-step log to this CSV file (none: no log)"
    )
    fit.add_argument("--no-progress", action="store_true", help="no progress bar")


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
    """Refuse the options given on the command line that the chosen ``--method`` ignores."""
    from .main import UsageError

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

    return train_hyperparameters(
        X,
        y,
        config,
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
    """The learned noise variance, outputscale and range of the lengthscales."""
    ls = kernel.lengthscale.detach().reshape(-1)
    print(
        f"hyperparameters: noise {noise:.4g}, outputscale "
        f"{float(kernel.outputscale.detach()):.4g}, lengthscales {ls.min():.3g}..{ls.max():.3g}"
    )


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
