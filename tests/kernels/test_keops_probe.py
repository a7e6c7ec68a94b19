"""``backend="auto"`` picks KeOps on a CUDA device only where a child process saw it work."""

from __future__ import annotations

import logging
import subprocess

import pytest
import torch

from pnsolve.kernels.backends import keops_probe
from pnsolve.kernels.backends.auto import DENSE_LIMIT_BYTES, choose_backend
from pnsolve.kernels.backends.keops import keops_available

pytestmark = pytest.mark.cpu_only(reason="the probe's verdicts, with child processes faked")

F64 = torch.float64
N = int((DENSE_LIMIT_BYTES / 8) ** 0.5) + 100  # past the dense limit


@pytest.fixture
def fake_child(monkeypatch: pytest.MonkeyPatch):
    """Replace the child process by a given outcome; forget earlier verdicts."""
    calls: list[str] = []

    def install(returncode: int, stdout: str = "", stderr: str = "") -> list[str]:
        def run(device: str) -> subprocess.CompletedProcess[str]:
            calls.append(device)
            return subprocess.CompletedProcess([], returncode, stdout, stderr)

        monkeypatch.setattr(keops_probe, "_run_child", run)
        monkeypatch.setattr(keops_probe, "keops_available", lambda: True)
        keops_probe._verdict.cache_clear()
        return calls

    yield install
    keops_probe._verdict.cache_clear()


def test_a_crashing_probe_sends_auto_to_chunked_and_says_why(fake_child, caplog) -> None:
    calls = fake_child(-11, stderr="Fatal Python error: Segmentation fault")
    with caplog.at_level(logging.WARNING, logger="pnsolve.linops"):
        assert choose_backend(N, N, F64, torch.device("cuda:0")) == "chunked"
        assert choose_backend(N, N, F64, torch.device("cuda:0")) == "chunked"
    assert calls == ["cuda:0"]  # one child per device for the process's life
    assert "a crash" in caplog.text and "Segmentation fault" in caplog.text


def test_a_working_probe_lets_auto_pick_keops_per_device(fake_child) -> None:
    calls = fake_child(0, stdout="keops-probe max-error 1e-07")
    assert choose_backend(N, N, F64, torch.device("cuda:1")) == "keops"
    assert choose_backend(N, N, F64, torch.device("cuda:0")) == "keops"
    assert choose_backend(N, N, F64, torch.device("cpu")) == "chunked"  # not asked on CPU
    assert calls == ["cuda:1", "cuda:0"]


def test_a_wrong_value_or_a_timeout_is_a_no(fake_child, monkeypatch, caplog) -> None:
    fake_child(3, stdout="keops-probe max-error 0.5")
    assert not keops_probe.keops_runs_on(torch.device("cuda:0"))
    keops_probe._verdict.cache_clear()

    def hang(device: str):
        raise subprocess.TimeoutExpired(["python"], keops_probe.PROBE_TIMEOUT_S)

    monkeypatch.setattr(keops_probe, "_run_child", hang)
    with caplog.at_level(logging.WARNING, logger="pnsolve.linops"):
        assert not keops_probe.keops_runs_on(torch.device("cuda:0"))
    assert "did not finish" in caplog.text


@pytest.mark.skipif(not keops_available(), reason="pykeops is not importable")
def test_the_child_script_itself_runs_and_checks_on_the_cpu() -> None:
    # the real child, on the CPU (pykeops's CPU build): the script a GPU machine runs
    done = keops_probe._run_child("cpu")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "keops-probe max-error" in done.stdout
