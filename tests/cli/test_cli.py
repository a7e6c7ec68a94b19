"""The `pnsolve` command line."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from pnsolve.cli import main

pytestmark = pytest.mark.cpu_only(
    reason="the CLI runs on CPU (no --device option), mostly in subprocesses"
)


@pytest.mark.slow
def test_demo_prints_table_and_writes_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(["demo", "--out", str(tmp_path), "--rank", "50"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Cholesky" in out and "CG + pivoted Cholesky" in out and "iterations" in out
    png = tmp_path / "convergence.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_preconditioning_helps_and_matches_cholesky() -> None:
    from pnsolve.cli.demo import run_demo

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


def test_demo_prints_tradeoff_table_and_writes_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    rc = main(["demo", "--out", str(tmp_path), "--rank", "50", "--pls-subset", "200"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Probabilistic linear solver" in out
    assert "rel. error vs Cholesky" in out and "reported uncertainty" in out
    for policy in ("CG", "UnitVector (pivot)", "UnitVector (random)", "Random (gaussian)"):
        assert policy in out
    png = tmp_path / "tradeoff.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in out


def test_tradeoff_rows_are_consistent(tmp_path: Path) -> None:
    import pnsolve as pn
    from pnsolve.cli.demo_tradeoff import run_tradeoff

    ds = pn.datasets.load_uci("concrete", split=0)
    X, y = ds.X_train[:150], ds.y_train[:150]
    kernel = pn.kernels.Matern(nu=1.5, lengthscale=2.0, outputscale=1.0)
    rows, path = run_tradeoff(
        X, y, kernel, 1e-2, checkpoints=(5, 60, 500), out=tmp_path, echo=lambda *_: None
    )
    assert path.exists()
    by_policy: dict[str, list] = {}
    for r in rows:
        by_policy.setdefault(r.policy, []).append(r)
    assert len(by_policy) == 4 and all(len(v) == 3 for v in by_policy.values())
    for rs in by_policy.values():
        assert [r.iterations for r in rs][:2] == [5, 60] and rs[2].iterations <= 150
        unc = [r.relative_uncertainty for r in rs]
        assert all(a >= b - 1e-12 for a, b in itertools.pairwise(unc))  # never increases
    # CG adapts to y: far more accurate than data-independent actions at 60 iterations.
    cg, rnd = by_policy["CG"][1], by_policy["Random (gaussian)"][1]
    assert cg.relative_error < 1e-2 < rnd.relative_error


def test_demo_rejects_negative_pls_subset(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:  # a usage error: exit status 2
        main(["demo", "--pls-subset", "-1"])
    assert exc.value.code == 2 and "--pls-subset" in capsys.readouterr().err


def test_demo_prints_itergp_table_and_writes_band_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    rc = main(["demo", "--out", str(tmp_path), "--rank", "50", "--pls-subset", "0"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "IterGP (CG policy) on a 1-d toy problem" in out
    assert "math. variance" in out and "comp. variance" in out
    png = tmp_path / "itergp.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in out


def test_itergp_demo_computational_variance_shrinks(tmp_path: Path) -> None:
    from pnsolve.cli.demo_itergp import run_itergp_demo

    rows, path = run_itergp_demo(
        out=tmp_path, n=120, budget=4, table_budgets=(1, 4, 120), echo=lambda *_: None
    )
    assert path.exists()
    comp = [r.comp_var for r in rows]
    assert all(c >= -1e-10 for c in comp)
    assert comp[0] >= comp[1] >= comp[2]
    # CG stops once the mean has converged (before rank n): comp. variance small, not 0.
    assert comp[2] < 1e-2 * comp[1]
    assert rows[2].mean_error < 1e-6
    assert len({r.math_var for r in rows}) == 1


def test_demo_rejects_negative_itergp_budget(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:  # a usage error: exit status 2
        main(["demo", "--itergp-budget", "-1", "--pls-subset", "0"])
    assert exc.value.code == 2 and "--itergp-budget" in capsys.readouterr().err
