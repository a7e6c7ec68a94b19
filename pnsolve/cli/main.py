"""The ``pnsolve`` command line.

Exit status: 0 on success, 2 for a usage error (bad or missing argument), 1 for a
runtime error (unreadable data, failed factorisation, ...), 130 on Ctrl-C. Every error
is one line on stderr, ``pnsolve COMMAND: error: ...``, never a traceback.
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

__all__ = ["main"]

#: exit status of a run stopped by Ctrl-C (128 + SIGINT, as shells report it)
EXIT_INTERRUPTED = 130


class UsageError(ValueError):
    """A bad combination of command-line arguments: reported like argparse's errors (exit 2)."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with each option's default, except where there is none to show.

    Required options and options whose default is ``None`` (their help says what
    leaving them out means) get no "(default: None)".
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.required or action.default is None:
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit status 2) and defaults in ``--help``."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(text: object) -> str:
    """``text`` with every run of whitespace (newlines included) collapsed to a space."""
    return " ".join(str(text).split())


_Number = TypeVar("_Number", int, float)
_R = TypeVar("_R")


def _number(text: str, kind: type[_Number]) -> _Number:
    try:
        return kind(text)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"must be {noun}, got {text!r}") from None


def positive_float(text: str) -> float:
    """Argparse type: a finite number > 0."""
    value = _number(text, float)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return value


def int_at_least(low: int, description: str | None = None) -> Callable[[str], int]:
    """Argparse type factory: an integer ≥ ``low`` ("must be ``description``" otherwise)."""
    description = description or f"an integer ≥ {low}"

    def convert(text: str) -> int:
        value = _number(text, int)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {description}, got {text!r}")
        return value

    convert.__name__ = f"int_at_least_{low}"
    return convert


#: Argparse type: an integer ≥ 1.
positive_int = int_at_least(1, "a positive integer")
#: Argparse type: an integer ≥ 0.
nonnegative_int = int_at_least(0, "a non-negative integer")


def forward_arguments(fn: Callable[..., _R], args: argparse.Namespace, **overrides: Any) -> _R:
    """Call ``fn`` with the parsed arguments it accepts (by name), ``overrides`` on top."""
    accepted = inspect.signature(fn).parameters
    kwargs = {name: value for name, value in vars(args).items() if name in accepted}
    return fn(**{**kwargs, **overrides})


def config_from_arguments(
    cls: Callable[..., _R],
    args: argparse.Namespace,
    *,
    flags: dict[str, str] | None = None,
    **overrides: Any,
) -> _R:
    """A command's settings object from its parsed arguments; bad values are usage errors.

    Parameters
    ----------
    cls
        The settings class (e.g. ``TrainingConfig``); called as :func:`forward_arguments`
        calls it.
    args
        The parsed arguments.
    flags
        The flag of each field set from an argument of another name (the others are
        ``--field-name``), for the error message.
    **overrides
        Values set on top of (or instead of) the arguments, e.g. derived ones.

    Returns
    -------
    object
        ``cls(...)`` of the arguments it accepts by name.

    Raises
    ------
    UsageError
        With the message of the ``ValueError`` or ``TypeError`` that ``cls`` raised, its
        field names written as the flags that set them.
    """
    try:
        return forward_arguments(cls, args, **overrides)
    except (ValueError, TypeError) as exc:
        fields = set(inspect.signature(cls).parameters) & set(vars(args))
        raise UsageError(_as_flags(str(exc), fields, flags or {})) from exc


def _as_flags(message: str, fields: Iterable[str], flags: dict[str, str]) -> str:
    """``message`` with the settings' field names written as the command's flags.

    Only where a name is meant as the setting: written ``name=value`` (→ ``--name
    value``), as the subject ``name must …``, or any name with an underscore (no plain
    word has one). A field becomes ``--its-name``; ``flags`` names the fields set from
    an argument of another name (e.g. ``freeze_threshold`` from ``--freeze``).
    """
    names = {name: "--" + name.replace("_", "-") for name in fields}
    names.update(flags)
    for name in sorted(names, key=len, reverse=True):
        flag = names[name]
        field = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
        message = re.sub(field + r"='([^']*)'", rf"{flag} \1", message)
        message = re.sub(field + r"=", f"{flag} ", message)
        if "_" in name:
            message = re.sub(field, flag, message)
        else:
            message = re.sub(field + r"(?= must )", flag, message)
    return message


def open_fraction(text: str) -> float:
    """Argparse type: a number strictly between 0 and 1."""
    value = _number(text, float)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {text!r}")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pnsolve", description="Probabilistic linear solvers and GPs in PyTorch.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="CG with and without preconditioning vs Cholesky on a real kernel system",
        description=(
            "Build K̂ = K + σ²I (Matérn-3/2) on a UCI training set, solve it with CG, "
            "preconditioned CG and Cholesky, print a table and write a convergence plot; "
            "then compare probabilistic-solver policies (error vs reported uncertainty) on a "
            "subset and write a trade-off plot; finally plot an IterGP posterior with its "
            "computational uncertainty band on a 1-d toy problem."
        ),
    )
    demo.add_argument("--dataset", default="concrete", help="UCI dataset name")
    demo.add_argument("--split", type=nonnegative_int, default=0, help="standard split 0..9")
    demo.add_argument(
        "--data-dir", default=None, help="folder with UCI datasets (none: the shipped data)"
    )
    demo.add_argument("--out", default="outputs/demo", help="output folder for the plots")
    demo.add_argument(
        "--lengthscale", type=positive_float, default=2.0, help="Matérn-3/2 lengthscale"
    )
    demo.add_argument(
        "--outputscale", type=positive_float, default=1.0, help="Matérn-3/2 outputscale"
    )
    demo.add_argument("--noise", type=positive_float, default=1e-2, help="noise variance σ² > 0")
    demo.add_argument(
        "--rank", type=positive_int, default=100, help="pivoted-Cholesky preconditioner rank"
    )
    demo.add_argument("--rtol", type=positive_float, default=1e-8, help="CG tolerance on ‖r‖ / ‖y‖")
    demo.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "dense", "chunked", "keops"],
        help="kernel-matrix backend",
    )
    demo.add_argument(
        "--pls-subset",
        type=nonnegative_int,
        default=400,
        help="points for the probabilistic-solver error/uncertainty table (0: skip)",
    )
    demo.add_argument(
        "--itergp-budget",
        type=nonnegative_int,
        default=8,
        help="CG iterations of the plotted 1-d IterGP posterior (0: skip)",
    )

    from .fit import add_fit_parser
    from .sample import add_sample_parser

    add_fit_parser(sub)
    add_sample_parser(sub)

    bench = sub.add_parser(
        "bench",
        help="run the benchmark suite of a source checkout (ratios against peers)",
        description="Run benchmarks/run_all.py from the pnsolve source checkout.",
    )
    bench.add_argument("--quick", action="store_true", help="small sizes only")
    return parser


def _is_linalg_error(exc: RuntimeError) -> bool:
    import torch

    return isinstance(exc, torch.linalg.LinAlgError)


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """``--backend`` (kernel products) and ``--timeout`` (collectives), for fit and sample."""
    from ..kernels.kernel_matrix import BACKENDS

    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="kernel-matrix backend; distributed: run under torchrun --nproc_per_node=P, "
        "rows of every product split over the ranks, rank 0 prints and writes",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=600.0,
        help="seconds a rank waits in a collective before failing (--backend distributed)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pnsolve`` command; returns the exit status."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "demo":
            from .demo import run_demo

            forward_arguments(run_demo, args)
            return 0
        if args.command in ("fit", "sample"):
            from .fit import run_fit
            from .launch import distributed_session
            from .sample import run_sample

            with distributed_session(args.backend, args.timeout, args.command) as lead:
                args.lead = lead  # only the lead process writes files
                return (run_fit if args.command == "fit" else run_sample)(args)
        if args.command == "bench":
            script = Path(__file__).resolve().parent.parent / "benchmarks" / "run_all.py"
            if not script.exists():
                raise FileNotFoundError("benchmarks/ not found; run it from a source checkout")
            cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
            return subprocess.call(cmd)
    except KeyboardInterrupt:
        print(f"pnsolve {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UsageError as e:
        print(
            f"pnsolve {args.command}: error: {one_line(e)} (see pnsolve {args.command} --help)",
            file=sys.stderr,
        )
        return 2
    except (ValueError, TypeError, OSError, ArithmeticError) as e:
        print(f"pnsolve {args.command}: error: {one_line(e)}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        if str(e).startswith('backend="distributed"'):  # a collective failed: one line
            print(f"pnsolve {args.command}: error: {one_line(e)}", file=sys.stderr)
            return 1
        if not _is_linalg_error(e):
            raise
        print(
            f"pnsolve {args.command}: error: {one_line(e)} (try a larger noise variance)",
            file=sys.stderr,
        )
        return 1
    parser.error(f"unknown command {args.command!r}")
    return 2
