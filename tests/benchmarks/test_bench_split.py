"""``make bench`` and ``make bench-studies`` split the benchmark scripts between them, and
the studies' results file (``_common.ResultStore``) skips finished units on a rerun."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    for name in ("run_all", "_common"):
        sys.modules.pop(name, None)
    import _common
    import run_all

    yield run_all, _common
    for name in ("run_all", "_common"):
        sys.modules.pop(name, None)


def test_every_script_in_exactly_one_set(bench):
    run_all, _ = bench
    scripts = sorted(p.name for p in (ROOT / "benchmarks").glob("bench_*.py"))
    listed = run_all.RATIOS + run_all.STUDIES
    assert sorted(listed) == scripts, "each bench_*.py is listed once, in RATIOS or STUDIES"
    assert not set(run_all.RATIOS) & set(run_all.STUDIES)
    assert run_all.select([])[0] == run_all.RATIOS
    assert run_all.select(["--studies", "--quick"]) == (run_all.STUDIES, ["--quick"])
    assert run_all.select(["--all"])[0] == run_all.RATIOS + run_all.STUDIES


def test_store_skips_a_finished_unit_and_fresh_recomputes(bench, tmp_path):
    _, common = bench
    calls: list[int] = []

    def compute(x: int) -> list[float]:
        calls.append(x)
        return [x / 3, float(x)]

    config = {"quick": False, "steps": 10}
    store = common.ResultStore("bench_x.py", config, directory=tmp_path)
    assert store.unit("a/1", compute, 1) == [1 / 3, 1.0]
    assert store.unit(
        "b",
        compute,
        2,
    ) == [2 / 3, 2.0]
    assert calls == [1, 2]

    # an interrupted run leaves a line cut short: ignored
    path = tmp_path / "bench_x.jsonl"
    with path.open("a") as fh:
        fh.write('{"script": "bench_x.py", "key": "c"')
    again = common.ResultStore("bench_x.py", config, directory=tmp_path)
    assert "a/1" in again and "b" in again and "c" not in again
    assert again.unit("a/1", compute, 1) == [1 / 3, 1.0]  # loaded, exactly
    assert calls == [1, 2]
    assert (again.loaded, again.computed) == (1, 0)

    # records name the script and the date; values survive exactly, else are pickled
    records = [json.loads(line) for line in path.read_text().splitlines()[:2]]
    assert {r["script"] for r in records} == {"bench_x.py"}
    assert all(len(r["date"]) == 10 and r["date"][4] == "-" for r in records)
    again.unit("tuple", lambda: (1, float("nan")))
    value = common.ResultStore("bench_x.py", config, directory=tmp_path).get("tuple")
    assert isinstance(value, tuple) and value[0] == 1 and value[1] != value[1]

    # another configuration, or --quick (its own file), does not see these units
    assert "a/1" not in common.ResultStore("bench_x.py", {**config, "steps": 5}, directory=tmp_path)
    assert "a/1" not in common.ResultStore("bench_x.py", {"quick": True}, directory=tmp_path)

    fresh = common.ResultStore("bench_x.py", config, directory=tmp_path, fresh=True)
    assert "a/1" not in fresh
    assert fresh.unit("a/1", compute, 1) == [1 / 3, 1.0]
    assert calls == [1, 2, 1]
    assert (tmp_path / "bench_x.jsonl.bak").exists()


def test_printed_unit_prints_again_when_loaded(bench, tmp_path, capsys):
    _, common = bench

    def table() -> int:
        print("== a table ==")
        return 7

    store = common.ResultStore("bench_y.py", {}, directory=tmp_path)
    assert store.printed_unit("t", table) == 7
    first = capsys.readouterr().out
    again = common.ResultStore("bench_y.py", {}, directory=tmp_path)
    assert again.printed_unit("t", lambda: pytest.fail("recomputed")) == 7
    assert capsys.readouterr().out == first == "== a table ==\n"
