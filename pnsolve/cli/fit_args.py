"""The arguments of ``pnsolve fit`` (its parser; the run itself is in :mod:`.fit`)."""

from __future__ import annotations

import argparse

__all__ = [
    "CAGP_OPTIONS",
    "METHODS",
    "MLL_OPTIONS",
    "SGD_DEFAULT_BUDGET",
    "add_data_arguments",
    "add_fit_parser",
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
            "Fit the hyperparameters of a GP (a Matérn-3/2 ARD kernel, or --kernel) by Adam, "
            "then print the test "
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
    add_data_arguments(fit)
    _add_training_arguments(fit)
    _add_cagp_arguments(fit)
    _add_output_arguments(fit)


def add_data_arguments(fit: argparse.ArgumentParser) -> None:
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
    fit.add_argument(
        "--kernel",
        default=None,
        help='the kernel as an expression, e.g. "rbf + periodic(period=12) * linear[0]" '
        "(families rbf, matern, matern12/32/52, rq, periodic, cosine, linear, polynomial, "
        "constant, white, sm; + and *, a number times a kernel, keyword arguments in (), "
        "columns in []; see pn.kernels.from_expression); trained from its own start "
        "values (--init sets the noise only); default: Matérn-3/2 ARD",
    )
    fit.add_argument("--solver", choices=SOLVERS, default="cg", help="--method mll's linear solver")
    fit.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default="pathwise",
        help="--method mll's gradient estimator (default pathwise; standard for a --kernel "
        "without random Fourier features: periodic, linear, polynomial or white parts)",
    )
    fit.add_argument(
        "--warm-start",
        action="store_true",
        help="--method mll: start each solve at the previous step's solutions, with fixed probes",
    )
    fit.add_argument("--steps", type=positive_int, default=100, help="Adam steps")
    fit.add_argument(
        "--lr",
        type=positive_float,
        default=None,
        help="Adam learning rate (default: --method mll 0.1, the TrainingConfig default; "
        "--method cagp 0.3 on the hyperparameters (pnsolve.gp.cagp.model.DEFAULT_LR), "
        "the actions at 0.1)",
    )
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
