"""`torchrun ... -m pnsolve -- fit|sample --backend distributed`: 2 gloo ranks on CPU.

The real launch path: torchrun starts two processes, each runs the command; rank 0
prints, writes the log, the checkpoint and the samples; every rank resumes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pnsolve.cli import main

pytestmark = [
    pytest.mark.slow,
    pytest.mark.cpu_only(reason="the CLI runs on CPU (no --device option), mostly in subprocesses"),
]

FIT = ["--dataset", "concrete", "--subsample", "300", "--solver", "cg", "--estimator",
       "standard", "--steps", "2", "--num-probes", "4", "--tol", "1e-8",
       "--no-progress"]  # fmt: skip


def _torchrun(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "pnsolve", "--", *args]  # fmt: skip
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def _metrics(out: str) -> dict[str, str]:
    return {line.split(":")[0]: line.split(":")[1].strip() for line in out.splitlines()
            if line.startswith(("test ", "hyperparameters"))}  # fmt: skip


def test_fit_under_torchrun_equals_one_process_and_resumes(tmp_path: Path, capsys) -> None:
    ck = tmp_path / "run.pt"
    args = ["fit", *FIT, "--checkpoint", str(ck), "--backend", "distributed"]
    args += ["--log", str(tmp_path / "log.csv")]
    run = _torchrun(args, tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count("test RMSE") == 1  # rank 0 prints, rank 1 is silent
    assert ck.exists() and (tmp_path / "log.csv").exists()
    # the same run in one process (its own checkpoint: the backend is part of the identity)
    assert main(["fit", *FIT, "--backend", "chunked"]) == 0
    single = _metrics(capsys.readouterr().out)
    assert _metrics(run.stdout) == single  # equal to the printed digits
    again = _torchrun(args, tmp_path)  # every rank resumes from rank 0's checkpoint
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("resuming from checkpoint") == 1
    assert "after step 2 of 2 (all steps done)" in again.stdout
    assert _metrics(again.stdout) == single


def test_sample_under_torchrun_writes_the_samples_once(tmp_path: Path) -> None:
    out = tmp_path / "s.npz"
    args = ["sample", "--dataset", "concrete", "--subsample", "200", "--iterations", "20",
            "--chains", "2", "--out", str(out), "--no-progress", "--predict-samples", "0",
            "--backend", "distributed"]  # fmt: skip
    run = _torchrun(args, tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count("wrote") == 1
    samples = np.load(out)["samples"]
    assert samples.shape == (2, 10, 3) and np.isfinite(samples).all()


def test_distributed_without_torchrun_says_how_to_launch(capsys, monkeypatch) -> None:
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    assert main(["fit", *FIT, "--backend", "distributed"]) == 2
    err = capsys.readouterr().err
    assert "runs under torchrun" in err and "--nproc_per_node" in err
