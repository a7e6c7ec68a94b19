"""The documentation site builds with warnings as errors (mkdocs --strict)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_docs_build_strictly(tmp_path: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    api = (tmp_path / "api" / "krylov" / "index.html").read_text()
    for name in ("pnsolve.krylov.cg", "pnsolve.krylov.lanczos"):
        assert f'id="{name}"' in api, name
    linops = (tmp_path / "api" / "linops" / "index.html").read_text()
    assert 'id="pnsolve.linops.as_linop"' in linops


def test_notation_table_names_code() -> None:
    text = (ROOT / "docs" / "notation.md").read_text()
    for name in ("KernelMatrix", "pn.lanczos", "rtol", "PivotedCholesky"):
        assert name in text
