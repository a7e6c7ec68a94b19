"""The ``pnsolve`` command line."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pnsolve", description="Probabilistic linear solvers and GPs in PyTorch."
    )
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
    demo.add_argument("--dataset", default="concrete", help="UCI dataset (default: concrete)")
    demo.add_argument("--split", type=int, default=0, help="standard split 0..9 (default: 0)")
    demo.add_argument("--data-dir", default=None, help="folder with UCI datasets")
    demo.add_argument("--out", default="outputs/demo", help="output folder for the plot")
    demo.add_argument("--lengthscale", type=float, default=2.0)
    demo.add_argument("--outputscale", type=float, default=1.0)
    demo.add_argument("--noise", type=float, default=1e-2, help="noise variance σ²")
    demo.add_argument("--rank", type=int, default=100, help="preconditioner rank")
    demo.add_argument("--rtol", type=float, default=1e-8, help="CG relative tolerance")
    demo.add_argument("--backend", default="auto", choices=["auto", "dense", "chunked", "keops"])
    demo.add_argument(
        "--pls-subset",
        type=int,
        default=400,
        help="points for the probabilistic-solver error/uncertainty table (0: skip)",
    )
    demo.add_argument(
        "--itergp-budget",
        type=int,
        default=8,
        help="CG iterations of the plotted 1-d IterGP posterior (0: skip)",
    )

    from .fit_cli import add_fit_parser

    add_fit_parser(sub)

    bench = sub.add_parser(
        "bench",
        help="run the benchmark suite of a source checkout (ratios against peers)",
        description="Run benchmarks/run_all.py from the pnsolve source checkout.",
    )
    bench.add_argument("--quick", action="store_true", help="small sizes only")
    return parser


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

            run_demo(
                args.dataset,
                split=args.split,
                out=args.out,
                lengthscale=args.lengthscale,
                outputscale=args.outputscale,
                noise=args.noise,
                rank=args.rank,
                rtol=args.rtol,
                backend=args.backend,
                data_dir=args.data_dir,
                pls_subset=args.pls_subset,
                itergp_budget=args.itergp_budget,
            )
            return 0
        if args.command == "fit":
            from .fit_cli import run_fit

            return run_fit(args)
        if args.command == "bench":
            script = Path(__file__).resolve().parent.parent / "benchmarks" / "run_all.py"
            if not script.exists():
                print(
                    "pnsolve bench: benchmarks/ not found; run it from a source checkout",
                    file=sys.stderr,
                )
                return 2
            cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
            return subprocess.call(cmd)
    except (ValueError, TypeError, FileNotFoundError, ArithmeticError) as e:
        print(f"pnsolve {args.command}: error: {e}", file=sys.stderr)
        return 1
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
