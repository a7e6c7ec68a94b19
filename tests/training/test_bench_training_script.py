"""The benchmark script for Lin et al. (2024), benchmarks/bench_training.py, runs end to
end at tiny sizes, in parallel processes, and reuses saved units without rerunning them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    sys.modules.pop("bench_training", None)
    import bench_training

    yield bench_training
    sys.modules.pop("bench_training", None)


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "--quick",
        # elevators ships with the package: the test runs without ../shared/data
        "--datasets",
        "elevators",
        "--es-dataset",
        "elevators",
        "--budgets",
        "5",
        "--figures",
        str(tmp_path / "fig"),
        "--results",
        str(tmp_path / "units"),
        *extra,
    ]


@pytest.mark.slow
def test_quick_run_then_reuse(bench, tmp_path, capsys):
    # without SGD the early-stopping study needs no learning rate (a KeyError once)
    assert bench.main(_args(tmp_path, "--solvers", "cg", "ap", "--jobs", "2")) == 0
    first = capsys.readouterr()
    assert "Table 1, elevators" in first.out and "Early stopping on elevators" in first.out
    assert (tmp_path / "fig" / "training_curves.png").stat().st_size > 0
    assert (tmp_path / "fig" / "training_early_stopping.png").stat().st_size > 0
    saved = sorted(p.name for p in (tmp_path / "units").iterdir())
    assert [name.split("-")[1] for name in saved] == ["ap", "cg", "exact"]

    # a second invocation reuses every saved unit: identical table-1 rows, no rerun
    assert (
        bench.main(_args(tmp_path, "--solvers", "cg", "ap", "--no-early-stopping", "--jobs", "1"))
        == 0
    )
    second = capsys.readouterr()
    assert second.err.count("reusing") == 3
    table = [line for line in first.out.splitlines() if line.startswith(("CG ", "AP "))][:8]
    again = [line for line in second.out.splitlines() if line.startswith(("CG ", "AP "))][:8]
    assert table == again and len(table) == 8
