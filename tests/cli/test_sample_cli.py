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
    if sampler == "sgld":
        assert f"sgld with {gradient} gradients" in out
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


def _config_of(tmp_path: Path, monkeypatch, *extra: str):
    """The ``ChainConfig`` that ``pnsolve sample`` with ``extra`` hands to the sampler."""
    import pnsolve.gp.bayes as bayes

    seen = []
    real = bayes.sample_hyperparameters

    def spy(X, y, config, **kwargs):
        seen.append(config)
        return real(X, y, config, **kwargs)

    monkeypatch.setattr(bayes, "sample_hyperparameters", spy)
    assert main(_args(tmp_path, *extra, "--predict-samples", "0")) == 0
    (config,) = seen
    return config


def test_roulette_and_freeze_settings_reach_the_sampler(tmp_path, monkeypatch):
    config = _config_of(tmp_path, monkeypatch, "--q", "0.03", "--beta", "0.3", "--freeze", "0.02")
    assert (config.beta, config.freeze_threshold) == (0.3, 0.02)
    assert config.alpha == pytest.approx(0.03 * 80**0.5)


def test_defaults_reach_the_sampler_and_new_settings_are_flags(tmp_path, monkeypatch):
    """Without --q/--freeze the chains get ChainConfig's defaults (the CLI used to pin
    the paper's q = 0.1 and freeze 0.002); --num-probes and --preconditioner-rank pass."""
    from pnsolve.gp.bayes import ChainConfig

    config = _config_of(tmp_path, monkeypatch, "--num-probes", "3", "--preconditioner-rank", "0")
    defaults = ChainConfig()
    assert (config.alpha, config.freeze_threshold) == (None, defaults.freeze_threshold)
    assert (config.num_probes, config.preconditioner_rank) == (3, 0)


def test_gradient_with_mh_is_refused_and_a_large_subset_reported(tmp_path, capsys):
    assert main(_args(tmp_path, "--sampler", "mh", "--gradient", "cg")) == 2
    assert "--sampler mh evaluates the exact likelihood" in capsys.readouterr().err
    args = _args(tmp_path, "--sampler", "mh", "--predict-samples", "0")
    args[args.index("--subset") + 1] = "500"
    assert main(args) == 0
    assert "--subset 500 is more than the 80 training rows" in capsys.readouterr().out


def test_unconverged_draws_are_named(tmp_path, capsys):
    """200 iterations are far too few: every parameter's ESS is below 100."""
    args = _args(tmp_path, "--sampler", "mh", "--predict-samples", "0")
    assert main(args) == 0
    out = capsys.readouterr().out
    for name in ("log_sigma", "log_tau", "log_lambda"):
        assert f"warning: {name} is not converged" in out
    assert "bulk ESS" in out
    args[args.index("--chains") + 1] = "1"
    assert main(args) == 0
    assert "PSRF is nan: it compares chains and there is one" in capsys.readouterr().out


def test_convergence_warnings_name_psrf_and_ess():
    from types import SimpleNamespace

    from pnsolve.cli.sample import convergence_warnings

    rows = [
        SimpleNamespace(name="a", psrf=1.05, ess=400.0),
        SimpleNamespace(name="b", psrf=1.3, ess=400.0),
        SimpleNamespace(name="c", psrf=1.0, ess=20.0),
    ]
    lines = convergence_warnings(rows, chains=4)
    assert len(lines) == 2
    assert lines[0].startswith("b is not converged: PSRF 1.300 > 1.1")
    assert lines[1].startswith("c is not converged: bulk ESS 20.0 < 100")


def test_required_options_show_no_default_none(capsys):
    with pytest.raises(SystemExit):
        main(["sample", "--help"])
    text = capsys.readouterr().out
    assert "(default: None)" not in text
    assert "steps per chain\n" in text or "steps per chain " in text


def test_the_torchrun_hint_names_the_command_and_the_separator(tmp_path, capsys, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert main(_args(tmp_path, "--backend", "distributed")) == 2
    assert "torchrun --nproc_per_node=2 -m pnsolve -- sample ..." in capsys.readouterr().err
