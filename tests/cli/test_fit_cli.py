"""`pnsolve fit`: runs on a CSV, writes plots and checkpoints, clear errors on bad input."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest
import torch

from pnsolve.cli import main

pytestmark = pytest.mark.cpu_only(
    reason="the CLI runs on CPU (no --device option), mostly in subprocesses"
)


def _csv(path: Path, n=160, gz=False) -> Path:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 3, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + X[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    lines = ["a,b,c,target"] + [
        ",".join(f"{v:.10g}" for v in (*row.tolist(), t)) for row, t in zip(X, y.tolist())
    ]
    text = "\n".join(lines) + "\n"
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("solver", ["cholesky", "cg", "ap", "sgd"])
def test_fit_prints_test_metrics(tmp_path: Path, capsys, solver):
    data = _csv(tmp_path / "toy.csv.gz", gz=True)
    estimator = "exact" if solver == "cholesky" else "pathwise"
    args = ["fit", "--data", str(data), "--solver", solver, "--estimator", estimator]
    args += ["--steps", "3", "--num-probes", "4", "--no-progress", "--block-size", "50"]
    args += ["--batch-size", "50", "--warm-start", "--epochs-budget", "20"]
    rc = main(args)
    out = capsys.readouterr().out
    assert rc == 0, out
    metrics = {
        line.split(":")[0]: float(line.split(":")[1])
        for line in out.splitlines()
        if line.startswith("test ")
    }
    # standardised targets with a strong signal: better than predicting N(0, 1)
    # (RMSE 1, mean log-likelihood −½ log 2π − ½ ≈ −1.419)
    assert metrics["test RMSE"] < 1.0
    assert metrics["test log-likelihood"] > -0.5 * math.log(2 * math.pi) - 0.5


def test_fit_writes_plot_and_resumes_from_checkpoint(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    png, ckpt = tmp_path / "curves.png", tmp_path / "run.pt"
    base = ["fit", "--data", str(data), "--solver", "cg", "--estimator", "standard"]
    base += ["--num-probes", "4", "--no-progress", "--checkpoint", str(ckpt)]
    log = tmp_path / "log.csv"
    assert main([*base, "--steps", "2", "--plot", str(png), "--log", str(log)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = log.read_text().splitlines()
    assert rows[0].startswith("step,residual_norm_mean,residual_norm_probes,epochs")
    assert len(rows) == 3
    first = capsys.readouterr().out
    assert "wrote" in first
    # the same run with more steps is another run: refused, naming the key
    assert main([*base, "--steps", "3"]) == 1
    assert "differs in: steps (checkpoint: 2, this run: 3)" in capsys.readouterr().err
    # the same command again resumes (all steps done): identical metrics
    assert main([*base, "--steps", "2"]) == 0
    again = capsys.readouterr().out
    pick = [line for line in first.splitlines() if line.startswith("test ")]
    assert pick == [line for line in again.splitlines() if line.startswith("test ")]


def test_missing_file_is_a_clear_error(tmp_path: Path, capsys):
    rc = main(["fit", "--data", str(tmp_path / "nope.csv"), "--steps", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "nope.csv" in err


def test_non_numeric_csv_is_a_clear_error(tmp_path: Path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n3,abc\n4,5\n")
    rc = main(["fit", "--data", str(bad), "--steps", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "bad.csv" in err


def test_unknown_solver_exits_nonzero(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--data", str(data), "--solver", "lu"])
    assert exc.value.code != 0
    assert "--solver" in capsys.readouterr().err


def test_data_source_is_required(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--steps", "1"])
    assert exc.value.code != 0
    assert "--data" in capsys.readouterr().err


def test_sgd_without_budget_gets_a_default_budget(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    args = ["fit", "--data", str(data), "--solver", "sgd", "--estimator", "pathwise"]
    rc = main([*args, "--steps", "2", "--num-probes", "4", "--batch-size", "40", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "epochs per step" in out and "test RMSE:" in out


def test_fit_takes_a_kernel_expression(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    args = ["fit", "--data", str(data), "--kernel", "rbf + periodic(period=2) * linear[0]"]
    rc = main([*args, "--steps", "3", "--num-probes", "4", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "estimator standard" in out  # a periodic part has no random Fourier features
    assert "kernel (RBF(" in out and "1.0.period" in out
    rc = main(["fit", "--data", str(data), "--kernel", "rbf + gauss", "--steps", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "--kernel" in err and "unknown kernel 'gauss'" in err


def test_fit_cagp_takes_a_kernel_expression(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    args = ["fit", "--data", str(data), "--method", "cagp", "--kernel", "matern52 + white"]
    rc = main([*args, "--steps", "2", "--num-actions", "8", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "White(noise=" in out


def test_fit_keeps_the_pathwise_estimator_for_a_kernel_with_features(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    args = ["fit", "--data", str(data), "--kernel", "rbf + sm(num_mixtures=2)[0]"]
    rc = main([*args, "--steps", "2", "--num-probes", "4", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "estimator pathwise" in out
