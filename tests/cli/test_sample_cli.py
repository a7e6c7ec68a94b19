"""`pnsolve sample`: the fixed command line (SGLD/MH, npz output, checkpoints)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pnsolve.cli import main

pytestmark = pytest.mark.cpu_only(
    reason="the CLI runs on CPU (no --device option), mostly in subprocesses"
)


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "sample", "--dataset", "concrete", "--subsample", "80", "--iterations", "200",
        "--chains", "2", "--seed", "1", "--out", str(tmp_path / "s.npz"), "--subset", "60",
        "--no-progress", "--processes", "1", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("sampler", "gradient"), [("sgld", "ulisse"), ("sgld", "cg"), ("sgld", "exact"), ("mh", None)]
)
def test_sample_writes_draws_and_prints_the_summary(tmp_path, capsys, sampler, gradient):
    extra = ["--sampler", sampler] + ([] if gradient is None else ["--gradient", gradient])
    rc = main(_args(tmp_path, *extra, "--plot", str(tmp_path / "trace.png")))
    out = capsys.readouterr().out
    assert rc == 0, out
    saved = np.load(tmp_path / "s.npz")
    assert saved["samples"].ndim == 3 and saved["samples"].shape[0] == 2
    assert saved["samples"].shape[2] == 3
    assert list(saved["names"]) == ["log_sigma", "log_tau", "log_lambda"]
    for name in saved["names"]:
        assert name in out
    assert "PSRF" in out and "ESS" in out and "per effective sample" in out
    assert "posterior predictive" in out and "type-II ML" in out
    assert (tmp_path / "trace.png").stat().st_size > 0


def test_a_checkpointed_run_resumes_to_the_same_file(tmp_path):
    ck = str(tmp_path / "ck")
    assert main(_args(tmp_path, "--gradient", "exact", "--checkpoint", ck)) == 0
    first = np.load(tmp_path / "s.npz")["samples"]
    assert (tmp_path / "ck.chain0.pt").exists()
    assert main(_args(tmp_path, "--gradient", "exact", "--checkpoint", ck)) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "s.npz")["samples"], first)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--sampler", "hmc"], "invalid choice"),
        (["--iterations", "0"], "positive integer"),
    ],
)
def test_usage_errors_exit_2(tmp_path, capsys, extra, match):
    args = _args(tmp_path)
    i = args.index(extra[0]) if extra[0] in args else None
    if i is not None:
        args[i + 1] = extra[1]
    else:
        args += extra
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert match in capsys.readouterr().err


def test_out_must_be_npz(tmp_path, capsys):
    args = _args(tmp_path)
    args[args.index("--out") + 1] = str(tmp_path / "s.csv")
    assert main(args) == 2
    assert "--out must name a .npz" in capsys.readouterr().err


def test_roulette_and_freeze_settings_reach_the_sampler(tmp_path, monkeypatch):
    import pnsolve.gp.bayes as bayes

    seen = []
    real = bayes.sample_hyperparameters

    def spy(X, y, config, **kwargs):
        seen.append(config)
        return real(X, y, config, **kwargs)

    monkeypatch.setattr(bayes, "sample_hyperparameters", spy)
    extra = ["--q", "0.03", "--beta", "0.3", "--freeze", "0.02", "--predict-samples", "0"]
    assert main(_args(tmp_path, *extra)) == 0
    (config,) = seen
    assert (config.beta, config.freeze_threshold) == (0.3, 0.02)
    assert config.alpha == pytest.approx(0.03 * 80**0.5)
