"""The documentation site builds with warnings as errors (mkdocs --strict)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_only(
    reason="documentation and its examples: no device-specific computation"
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_docs_build_strictly(site: Path) -> None:
    api = (site / "api" / "krylov" / "index.html").read_text()
    for name in ("pnsolve.krylov.cg", "pnsolve.krylov.lanczos"):
        assert f'id="{name}"' in api, name
    linops = (site / "api" / "linops" / "index.html").read_text()
    assert 'id="pnsolve.linops.as_linop"' in linops


def test_notation_table_names_code() -> None:
    text = (ROOT / "docs" / "notation.md").read_text()
    for name in ("KernelMatrix", "pn.lanczos", "rtol", "PivotedCholesky"):
        assert name in text
