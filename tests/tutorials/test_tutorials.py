"""Execute every tutorial (jupytext percent-format scripts) in smoke mode."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest

TUTORIALS = sorted((Path(__file__).resolve().parents[2] / "tutorials").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torch_threads
) -> None:
    monkeypatch.setenv("PNSOLVE_SMOKE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    # one torch thread per test worker: `make test` runs two workers on two cores, and
    # oversubscribed threads make tutorials with many small operations 10x slower
    with torch_threads(1):
        runpy.run_path(str(path), run_name="__main__")
    assert any((tmp_path / "outputs" / "tutorials").glob("*.png")), "tutorial wrote no figure"


def test_tutorials_exist() -> None:
    assert TUTORIALS, "no tutorials found"
    for p in TUTORIALS:
        head = p.read_text().splitlines()[:8]
        assert any("format_name: percent" in line for line in head), f"{p.name} is not jupytext"
    assert os.sep not in TUTORIALS[0].stem
