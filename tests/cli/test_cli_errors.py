"""Command-line robustness: one-line errors, checkpoints, Ctrl-C, progress and ``--help``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import torch

import pnsolve.gp.training.loop as loop
from pnsolve.cli import main
from pnsolve.cli.main import _build_parser
from pnsolve.gp.training import load_checkpoint

pytestmark = pytest.mark.cpu_only(
    reason="the CLI runs on CPU (no --device option), mostly in subprocesses"
)

ROOT = Path(__file__).resolve().parents[2]


def _csv(path: Path, n: int = 40) -> Path:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    rows = [",".join(f"{v:.10g}" for v in (*r.tolist(), t)) for r, t in zip(X, y.tolist())]
    path.write_text("a,b,target\n" + "\n".join(rows) + "\n")
    return path


def _fit(data: Path, *extra: str) -> list[str]:
    args = ["fit", "--data", str(data), "--solver", "cg", "--estimator", "pathwise"]
    return [*args, "--num-probes", "2", "--epochs-budget", "3", "--no-progress", *extra]


def _one_line_error(capsys, prefix: str = "pnsolve") -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(prefix)
    return err


def _metrics(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("test ")]


# ---------------------------------------------------------------- checkpoints


def test_checkpoint_of_another_seed_is_refused_naming_the_key(tmp_path: Path, capsys):
    # before: the --seed 1 checkpoint was silently reused by --seed 2 (the seed-1 result)
    data, ckpt = _csv(tmp_path / "toy.csv"), tmp_path / "run.pt"
    assert main([*_fit(data, "--steps", "1", "--checkpoint", str(ckpt), "--seed", "1")]) == 0
    capsys.readouterr()
    assert main([*_fit(data, "--steps", "1", "--checkpoint", str(ckpt), "--seed", "2")]) == 1
    err = _one_line_error(capsys, "pnsolve fit: error: checkpoint")
    assert "run.pt" in err and "seed (checkpoint: 1, this run: 2)" in err
    assert "{" not in err  # no dump of the whole configuration


def test_checkpoint_mismatch_names_only_the_differing_keys(tmp_path: Path, capsys):
    # before: the error printed both 25-key configuration dicts
    data, ckpt = _csv(tmp_path / "toy.csv"), tmp_path / "run.pt"
    assert main([*_fit(data, "--steps", "1", "--checkpoint", str(ckpt))]) == 0
    capsys.readouterr()
    assert main([*_fit(data, "--steps", "1", "--checkpoint", str(ckpt), "--lr", "0.05")]) == 1
    err = _one_line_error(capsys)
    assert "differs in: lr (checkpoint: 0.1, this run: 0.05)." in err


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_checkpoint_is_refused_naming_the_file(tmp_path: Path, capsys, damage):
    # before: a plausible corrupted value loaded and silently changed the result
    data, ckpt = _csv(tmp_path / "toy.csv"), tmp_path / "run.pt"
    assert main([*_fit(data, "--steps", "1", "--checkpoint", str(ckpt))]) == 0
    capsys.readouterr()
    raw = bytearray(ckpt.read_bytes())
    if damage == "flip":  # one bit of a stored solution: loads fine without a checksum
        solutions = load_checkpoint(ckpt)["solutions"]
        raw[raw.index(solutions.reshape(-1).view(torch.uint8).numpy().tobytes())] ^= 0x01
    else:
        del raw[-64:]
    ckpt.write_bytes(bytes(raw))
    assert main([*_fit(data, "--steps", "1", "--checkpoint", str(ckpt))]) == 1
    err = _one_line_error(capsys)
    assert f"checkpoint {str(ckpt)!r} is corrupt or truncated" in err


# ---------------------------------------------------------------- Ctrl-C and resume


def test_ctrl_c_reports_the_checkpoint_and_exits_130_then_resumes(
    tmp_path: Path, capsys, monkeypatch
):
    data, ckpt = _csv(tmp_path / "toy.csv"), tmp_path / "run.pt"
    assert main(_fit(data, "--steps", "3")) == 0
    reference = _metrics(capsys.readouterr().out)

    real_save, saves = loop.save_checkpoint, []

    def save_then_ctrl_c(path, state):
        real_save(path, state)
        saves.append(path)
        if len(saves) == 2:  # Ctrl-C right after the second step was saved
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "save_checkpoint", save_then_ctrl_c)
    assert main(_fit(data, "--steps", "3", "--checkpoint", str(ckpt))) == 130
    err = _one_line_error(capsys, "pnsolve fit: interrupted")
    assert f"after 2 of 3 steps; checkpoint {ckpt} holds them" in err

    monkeypatch.setattr(loop, "save_checkpoint", real_save)
    assert main(_fit(data, "--steps", "3", "--checkpoint", str(ckpt))) == 0
    out = capsys.readouterr().out
    assert f"resuming from checkpoint {ckpt} after step 2 of 3" in out
    assert _metrics(out) == reference  # the interrupted run continues the same trajectory


def test_ctrl_c_without_checkpoint_says_nothing_was_saved(tmp_path: Path, capsys, monkeypatch):
    data = _csv(tmp_path / "toy.csv")

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("pnsolve.gp.training.train_hyperparameters", ctrl_c)
    assert main(_fit(data, "--steps", "3")) == 130
    assert "no --checkpoint given: nothing saved" in _one_line_error(capsys)
    assert main(_fit(data, "--steps", "3", "--checkpoint", str(tmp_path / "c.pt"))) == 130
    assert "before the first step completed: nothing saved" in _one_line_error(capsys)


# ---------------------------------------------------------------- bad data and arguments


def test_gz_that_is_not_gzip_is_a_one_line_error(tmp_path: Path, capsys):
    # before: a gzip.BadGzipFile traceback
    fake = tmp_path / "fake.csv.gz"
    fake.write_text("a,b\n1,2\n3,4\n5,6\n")
    assert main(["fit", "--data", str(fake), "--steps", "1", "--no-progress"]) == 1
    err = _one_line_error(capsys, "pnsolve fit: error:")
    assert "fake.csv.gz is not a valid gzip file" in err


@pytest.mark.parametrize("value", ["inf", "-Inf", "nan"])
def test_csv_with_non_finite_value_names_the_line(tmp_path: Path, capsys, value):
    # before: "X contains NaN values" for an Inf, without the file or line
    bad = tmp_path / "bad.csv"
    bad.write_text(f"a,b\n1,2\n{value},3\n4,5\n6,7\n")
    assert main(["fit", "--data", str(bad), "--steps", "1", "--no-progress"]) == 1
    err = _one_line_error(capsys, "pnsolve fit: error:")
    assert f"bad.csv, line 3: non-finite value {value!r}" in err


@pytest.mark.parametrize("noise", ["0", "-1", "nan"])
def test_demo_rejects_non_positive_noise(capsys, noise):
    # before: a torch LinAlgError traceback from the Cholesky factorisation
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--noise", noise])
    assert exc.value.code == 2
    err = _one_line_error(capsys, "pnsolve demo: error: argument --noise")
    assert "positive finite number" in err


def test_run_demo_validates_its_arguments():
    from pnsolve.cli.demo import run_demo

    for name in ("noise", "lengthscale", "outputscale", "rtol"):
        with pytest.raises(ValueError, match=name):
            run_demo(**{name: 0.0}, echo=lambda *_: None)
    with pytest.raises(ValueError, match="rank"):
        run_demo(rank=0, echo=lambda *_: None)


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["fit", "--dataset", "pol", "--steps", "0"], "--steps"),
        (["fit", "--dataset", "pol", "--subsample", "1"], "--subsample"),
        (["fit", "--dataset", "pol", "--test-fraction", "1.5"], "--test-fraction"),
        (["fit", "--dataset", "pol", "--lr", "abc"], "--lr"),
        (["demo", "--rank", "0"], "--rank"),
        (["demo", "--pls-subset", "-1"], "--pls-subset"),
    ],
)
def test_bad_argument_values_are_one_line_usage_errors(capsys, argv, name):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert f"argument {name}: must be" in _one_line_error(capsys)


def test_bad_argument_combination_is_a_one_line_usage_error(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    rc = main(["fit", "--data", str(data), "--solver", "cg", "--estimator", "exact"])
    assert rc == 2
    assert "use --solver cholesky" in _one_line_error(capsys, "pnsolve fit: error:")


# ---------------------------------------------------------------- progress and help


def test_progress_shows_solver_and_setup_epochs_separately(tmp_path: Path, capsys):
    # before: "epochs=4.0" under a "≤ 3 epochs/step" header (set-up work included)
    data = _csv(tmp_path / "toy.csv")
    args = [a for a in _fit(data, "--steps", "2") if a != "--no-progress"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "≤ 3 solver epochs/step (set-up epochs extra)" in out
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert "solver_epochs=3.0" in last and "setup_epochs=1.0" in last
    assert re.search(r"solver: 6\.0 solver \+ \d+\.\d set-up epochs in all", out)


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = _build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_help_option_has_a_text_and_its_default(command, capsys):
    """Every option has help; its default is shown unless it is required or has none
    (``None``: the help says what leaving it out means), never "(default: None)"."""
    parser = _subcommands()[command]
    formatter = parser._get_formatter()
    shown = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command} {action.option_strings}: no help text"
        has_default = not action.required and action.default is not None
        assert ("%(default)" in formatter._get_help_string(action)) == has_default
        if has_default:
            shown.append(action)
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in text
    for action in shown:
        assert f"(default: {action.default})" in text, action.option_strings


def test_no_paper_internal_jargon_in_the_command_line(capsys):
    jargon = re.compile(r"seed 0\d\d|the seed's", re.IGNORECASE)
    for command in _subcommands():
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert not jargon.search(capsys.readouterr().out), command
    sources = sorted((ROOT / "pnsolve" / "cli").glob("*.py"))
    sources += sorted((ROOT / "pnsolve" / "gp" / "training").glob("*.py"))
    for source in sources:
        assert not jargon.search(source.read_text()), source.name


def test_settings_errors_name_flags_but_leave_plain_words_alone():
    """A settings error is written with the command's flags where a name means the
    setting (``name=…``, ``name must``, names with an underscore); a plain word that
    happens to be a flag's name ("the exact gradient") is left as it is."""
    from pnsolve.cli.main import _as_flags

    message = (
        "MH and the exact gradient factor K̂ on the data; step_end must be smaller than "
        "step_start, got step_start=0.1; solver='cg'; backend must be one of"
    )
    fields = ["gradient", "data", "step_end", "step_start", "solver", "backend"]
    assert _as_flags(message, fields, {"freeze_threshold": "--freeze"}) == (
        "MH and the exact gradient factor K̂ on the data; --step-end must be smaller than "
        "--step-start, got --step-start 0.1; --solver cg; --backend must be one of"
    )
