"""`pnsolve fit --method cagp`: CaGP by its ELBO from the command line, beside `--method mll`."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest
import torch

import pnsolve as pn
from pnsolve.cli import main

pytestmark = pytest.mark.cpu_only(
    reason="the CLI runs on CPU (no --device option), mostly in subprocesses"
)

#: mean test log-likelihood of predicting N(0, 1) for standardised targets
NULL_LOG_LIKELIHOOD = -0.5 * math.log(2 * math.pi) - 0.5


def _csv(path: Path, n: int = 160) -> Path:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 3, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + X[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)
    rows = [",".join(f"{v:.10g}" for v in (*r.tolist(), t)) for r, t in zip(X, y.tolist())]
    path.write_text("a,b,c,target\n" + "\n".join(rows) + "\n")
    return path


def _cagp(data: Path, *extra: str) -> list[str]:
    args = ["fit", "--data", str(data), "--method", "cagp", "--num-actions", "16"]
    return [*args, "--steps", "10", "--no-progress", *extra]


def _values(out: str) -> dict[str, float]:
    """``name: number ...`` result lines by name (the first number of each)."""
    found = {}
    for line in out.splitlines():
        name, sep, rest = line.partition(": ")
        if sep and name in ("test RMSE", "test log-likelihood", "final ELBO"):
            found[name] = float(rest.split()[0])
        if name == "hyperparameters":
            found["noise"] = float(rest.split(",")[0].split()[1])
    return found


def _metrics(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("test ")]


def _one_line_error(capsys, prefix: str = "pnsolve fit: error:") -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(prefix), err
    return err


def test_cagp_prints_test_metrics_final_elbo_and_learned_noise(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    assert main(_cagp(data)) == 0
    out = capsys.readouterr().out
    assert "CaGP, 16 actions (random blocks), 10 steps" in out.splitlines()[0]
    values = _values(out)
    assert set(values) == {"test RMSE", "test log-likelihood", "final ELBO", "noise"}, out
    # standardised targets with a strong signal: better than predicting N(0, 1)
    assert values["test RMSE"] < 1.0
    assert values["test log-likelihood"] > NULL_LOG_LIKELIHOOD
    assert math.isfinite(values["final ELBO"]) and values["noise"] > 0
    assert "per training row" in out and "predictions: CaGP posterior (16 actions)" in out


def test_cagp_lines_are_the_models_own_numbers(tmp_path: Path, capsys):
    """The printed metrics are CaGP's posterior (+ noise) on the test rows, ELBO and noise."""
    data = _csv(tmp_path / "toy.csv")
    assert main(_cagp(data, "--steps", "4", "--blocks", "kmeans")) == 0
    printed = _values(capsys.readouterr().out)
    ds = pn.datasets.load_csv(data, test_fraction=0.1, split_seed=0)
    X, y = ds.X_train, ds.y_train
    kernel = pn.kernels.Matern(nu=1.5, lengthscale=torch.ones(3, dtype=X.dtype), outputscale=1.0)
    m = pn.gp.CaGP(kernel, 1.0, 16, blocks="kmeans", mean=float(y.mean()))
    m.fit(X, y, steps=4, generator=torch.Generator().manual_seed(0))  # the model's rates
    post = m.posterior(ds.X_test)
    var = post.var + m.noise
    assert printed["test RMSE"] == pytest.approx(pn.metrics.rmse(post.mean, ds.y_test), abs=1e-4)
    llh = pn.metrics.gaussian_log_likelihood(post.mean, var, ds.y_test)
    assert printed["test log-likelihood"] == pytest.approx(llh, abs=1e-4)
    assert printed["final ELBO"] == pytest.approx(m.elbo(X, y), abs=1e-3)
    assert printed["noise"] == pytest.approx(m.noise, rel=1e-3)


def test_default_method_is_mll_and_unchanged(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    args = ["fit", "--data", str(data), "--steps", "2", "--num-probes", "4", "--no-progress"]
    assert main(args) == 0
    default = capsys.readouterr().out
    assert "solver cg, estimator pathwise, cold start, 2 steps" in default
    assert "final ELBO" not in default and "CaGP" not in default
    assert main([*args, "--method", "mll"]) == 0
    assert _metrics(capsys.readouterr().out) == _metrics(default)
    assert len(_metrics(default)) == 2


@pytest.mark.parametrize(
    ("flag", "written"),
    [
        (["--solver", "cg"], "--solver cg"),  # the default value, given: still refused
        (["--estimator", "standard"], "--estimator standard"),
        (["--warm-start"], "--warm-start"),
        (["--epochs-budget", "5"], "--epochs-budget 5.0"),
        (["--num-probes", "8"], "--num-probes 8"),
        (["--predict", "cholesky"], "--predict cholesky"),
    ],
)
def test_options_of_mll_are_refused_with_cagp_by_name(tmp_path: Path, capsys, flag, written):
    data = _csv(tmp_path / "toy.csv")
    assert main(_cagp(data, *flag)) == 2
    err = _one_line_error(capsys)
    assert f"error: {written} sets how --method mll" in err
    assert "--method cagp" in err and "leave it out" in err


def test_several_inapplicable_options_are_all_named(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    assert main(_cagp(data, "--tol", "0.1", "--sgd-lr", "0.5")) == 2
    assert "--tol 0.1, --sgd-lr 0.5 set how --method mll" in _one_line_error(capsys)


@pytest.mark.parametrize("method", [[], ["--method", "mll"]])
@pytest.mark.parametrize(
    ("flag", "written"),
    [(["--num-actions", "8"], "--num-actions 8"), (["--blocks", "random"], "--blocks random")],
)
def test_options_of_cagp_are_refused_with_mll_by_name(
    tmp_path: Path, capsys, method, flag, written
):
    data = _csv(tmp_path / "toy.csv")
    assert main(["fit", "--data", str(data), "--steps", "1", *method, *flag]) == 2
    err = _one_line_error(capsys)
    assert f"error: {written} sets CaGP's actions" in err and "add --method cagp" in err


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "many"])
def test_num_actions_below_one_or_not_an_integer_is_refused_by_name(tmp_path: Path, capsys, value):
    data = _csv(tmp_path / "toy.csv")
    with pytest.raises(SystemExit) as exc:
        main(_cagp(data, "--num-actions", value))
    assert exc.value.code == 2
    assert "argument --num-actions: must be" in _one_line_error(capsys)


def test_more_actions_than_training_rows_is_refused_by_name(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")  # 144 training rows, 16 test rows
    assert main(_cagp(data, "--num-actions", "145")) == 2
    err = _one_line_error(capsys)
    assert "--num-actions 145 is more than the 144 training rows" in err
    assert main(_cagp(data, "--num-actions", "30", "--subsample", "20")) == 2
    err = _one_line_error(capsys)
    assert "--num-actions 30 is more than the 20 training rows" in err and "--subsample" in err
    assert main(_cagp(data, "--num-actions", "20", "--subsample", "20", "--steps", "2")) == 0


def test_num_actions_defaults_to_256_capped_at_the_training_rows(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv", n=60)
    args = ["fit", "--data", str(data), "--method", "cagp", "--steps", "2", "--no-progress"]
    assert main(args) == 0
    assert "CaGP, 54 actions (random blocks)" in capsys.readouterr().out


def test_progress_bar_by_default(tmp_path: Path, capsys):
    data = _csv(tmp_path / "toy.csv")
    args = [a for a in _cagp(data, "--steps", "3") if a != "--no-progress"]
    assert main(args) == 0
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("CaGP: 100%") and "3/3" in last and "elbo=" in last


def test_checkpoint_resumes_log_and_plot_are_written(tmp_path: Path, capsys):
    data, ckpt = _csv(tmp_path / "toy.csv"), tmp_path / "run.pt"
    assert main(_cagp(data, "--steps", "4")) == 0
    reference = _metrics(capsys.readouterr().out)
    assert main(_cagp(data, "--steps", "2", "--checkpoint", str(ckpt))) == 0
    capsys.readouterr()
    png, log = tmp_path / "elbo.png", tmp_path / "steps.csv"
    args = _cagp(data, "--steps", "4", "--checkpoint", str(ckpt), "--plot", str(png))
    assert main([*args, "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"resumed from checkpoint {ckpt} after step 2 of 4" in out
    assert _metrics(out) == reference  # the resumed run continues the same trajectory
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = log.read_text().splitlines()
    assert rows[0] == "step,elbo,seconds" and len(rows) == 5
    # another seed is another run: refused naming the file
    assert main(_cagp(data, "--steps", "4", "--checkpoint", str(ckpt), "--seed", "1")) == 1
    err = _one_line_error(capsys)
    assert "run.pt" in err and "another seed" in err


def test_ctrl_c_reports_the_checkpoint_and_exits_130(tmp_path: Path, capsys, monkeypatch):
    data, ckpt = _csv(tmp_path / "toy.csv"), tmp_path / "run.pt"
    real_fit = pn.gp.CaGP.fit

    def two_steps_then_ctrl_c(self, X, y, **kwargs):
        real_fit(self, X, y, **{**kwargs, "steps": 2})
        raise KeyboardInterrupt

    monkeypatch.setattr(pn.gp.CaGP, "fit", two_steps_then_ctrl_c)
    assert main(_cagp(data, "--steps", "4", "--checkpoint", str(ckpt))) == 130
    err = _one_line_error(capsys, "pnsolve fit: interrupted")
    assert f"after 2 of 4 steps; checkpoint {ckpt} holds them" in err
    assert main(_cagp(data, "--steps", "4")) == 130
    assert "no --checkpoint given: nothing saved" in _one_line_error(capsys, "pnsolve")


def test_distributed_checkpoint_is_refused():
    """Every rank of a torchrun launch would write CaGP's checkpoint file."""
    from pnsolve.cli.fit_cagp import run_cagp
    from pnsolve.cli.main import UsageError

    args = argparse.Namespace(backend="distributed", checkpoint="run.pt")
    with pytest.raises(UsageError, match="--checkpoint with --method cagp --backend distributed"):
        run_cagp(args)


def test_help_mentions_cagp_and_its_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--method {mll,cagp}" in text and "(default: mll)" in text
    assert "--num-actions NUM_ACTIONS" in text and "--blocks {random,kmeans}" in text
    assert "none: 256, or n when there are fewer rows" in text
    assert "pn.gp.CaGP" in text
