"""Error catalogue cases: the command line, its data files and checkpoints."""

from __future__ import annotations

from pathlib import Path

from error_catalogue_inputs import (
    Case,
    CliExit,
    _checkpoint,
    _cli,
    _damaged_checkpoint,
    _fit_args,
    _write_csv,
)

#: ``pnsolve fit --method cagp`` on the 40-row ``toy.csv`` (36 training rows)
_CAGP_ARGS = ("fit", "--data", "toy.csv", "--method", "cagp", "--steps", "1", "--no-progress")

CLI_CASES: dict[str, Case] = {
    # --- command line and its data files
    "cli-missing-file": Case(
        "CLI",
        "a data file that does not exist",
        _cli(*_fit_args("nope.csv")),
        CliExit,
        "exit 1: .*nope.csv",
    ),
    "cli-not-gzip": Case(
        "CLI",
        "a `.csv.gz` that is not gzip",
        _cli(*_fit_args("fake.csv.gz"), setup=lambda: Path("fake.csv.gz").write_text("1,2\n")),
        CliExit,
        "exit 1: .*fake.csv.gz is not a valid gzip file",
    ),
    "cli-distributed-launch": Case(
        "CLI",
        "`--backend distributed` without torchrun",
        _cli(
            *_fit_args("toy.csv", "--backend", "distributed"), setup=lambda: _write_csv("toy.csv")
        ),
        CliExit,
        "exit 2: .*runs under torchrun",
    ),
    "cli-inf": Case(
        "CLI",
        "a CSV with an infinite value",
        _cli(*_fit_args("inf.csv"), setup=lambda: _write_csv("inf.csv", bad="inf")),
        CliExit,
        "exit 1: .*inf.csv, line 3: non-finite value",
    ),
    "cli-text": Case(
        "CLI",
        "a CSV with a non-numeric value",
        _cli(*_fit_args("text.csv"), setup=lambda: _write_csv("text.csv", bad="abc")),
        CliExit,
        "exit 1: .*text.csv",
    ),
    "cli-solver": Case(
        "CLI",
        "an unknown solver",
        _cli(*_fit_args("toy.csv", "--solver", "lu")),
        CliExit,
        "exit 2: .*--solver",
    ),
    "cli-steps": Case(
        "CLI",
        "a non-positive number of steps",
        _cli(*_fit_args("toy.csv", "--steps", "0"), setup=_write_csv),
        CliExit,
        "exit 2: .*--steps",
    ),
    "cli-combination": Case(
        "CLI",
        "an exact estimator with an iterative solver",
        _cli(*_fit_args("toy.csv", "--estimator", "exact"), setup=_write_csv),
        CliExit,
        "exit 2: .*exact",
    ),
    "cli-method-options": Case(
        "CLI",
        "an option of `--method mll` with `--method cagp`",
        _cli(*_CAGP_ARGS, "--solver", "cg", setup=_write_csv),
        CliExit,
        "exit 2: .*--solver cg sets how --method mll solves",
    ),
    "cli-num-actions": Case(
        "CLI",
        "more CaGP actions than training rows",
        _cli(*_CAGP_ARGS, "--num-actions", "100", setup=_write_csv),
        CliExit,
        "exit 2: .*--num-actions 100 is more than the 36 training rows",
    ),
    "cli-dataset": Case(
        "CLI",
        "an unknown data set name",
        _cli("fit", "--dataset", "boston", "--steps", "1", "--no-progress"),
        CliExit,
        "exit 1: .*boston",
    ),
    "cli-demo-noise": Case(
        "CLI",
        "`pnsolve demo --noise 0`",
        _cli("demo", "--noise", "0"),
        CliExit,
        "exit 2: .*--noise",
    ),
    "cli-sample-steps": Case(
        "CLI",
        "`pnsolve sample` with `--step-end` above `--step-start`",
        _cli(
            "sample",
            "--data",
            "toy.csv",
            "--iterations",
            "10",
            "--out",
            "s.npz",
            "--step-start",
            "1e-4",
            "--step-end",
            "0.1",
            setup=_write_csv,
        ),
        CliExit,
        "exit 2: .*--step-end must be smaller than --step-start",
    ),
    # --- checkpoints
    "checkpoint-seed": Case(
        "checkpoints",
        "resuming a checkpoint written with another seed",
        _cli(*_fit_args("toy.csv", "--checkpoint", "run.pt", "--seed", "2"), setup=_checkpoint),
        CliExit,
        r"exit 1: .*run.pt.*seed \(checkpoint: 0, this run: 2\)",
    ),
    "checkpoint-config": Case(
        "checkpoints",
        "resuming with another learning rate",
        _cli(*_fit_args("toy.csv", "--checkpoint", "run.pt", "--lr", "0.05"), setup=_checkpoint),
        CliExit,
        r"exit 1: .*differs in: lr",
    ),
    "checkpoint-truncated": Case(
        "checkpoints",
        "a truncated or corrupted checkpoint",
        _cli(*_fit_args("toy.csv", "--checkpoint", "run.pt"), setup=_damaged_checkpoint),
        CliExit,
        "exit 1: .*run.pt.* corrupt or truncated",
    ),
    "checkpoint-foreign": Case(
        "checkpoints",
        "a file that is not a checkpoint",
        _cli(
            *_fit_args("toy.csv", "--checkpoint", "notes.txt"),
            setup=lambda: (_write_csv(), Path("notes.txt").write_text("hello\n")),
        ),
        CliExit,
        "exit 1: .*notes.txt.* not a pnsolve training checkpoint",
    ),
}
