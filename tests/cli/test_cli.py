"""The `pnsolve` command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pnsolve.cli import main


def test_demo_prints_table_and_writes_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(["demo", "--out", str(tmp_path), "--rank", "50"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Cholesky" in out and "CG + pivoted Cholesky" in out and "iterations" in out
    png = tmp_path / "convergence.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_preconditioning_helps_and_matches_cholesky() -> None:
    from pnsolve.demo import run_demo

    rows, _ = run_demo(out="outputs/test-demo", echo=lambda *_: None)
    chol, cg, pcg = rows
    assert chol.relative_residual < 1e-10
    assert pcg.iterations < cg.iterations
    for r in (cg, pcg):
        assert r.relative_residual <= 1e-8 * 1.01
        assert r.relative_error < 1e-4


def test_unknown_dataset_is_a_clear_error(capsys: pytest.CaptureFixture) -> None:
    rc = main(["demo", "--dataset", "no-such-set"])
    err = capsys.readouterr().err
    assert rc == 1 and "no-such-set" in err


def test_help_and_no_command(capsys: pytest.CaptureFixture) -> None:
    assert main([]) == 2
    with pytest.raises(SystemExit) as e:
        main(["demo", "--help"])
    assert e.value.code == 0
    assert "convergence plot" in capsys.readouterr().out


def test_console_script_entry_point() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "pnsolve.cli", "--help"], capture_output=True, text=True
    )
    assert r.returncode == 0 and "demo" in r.stdout
