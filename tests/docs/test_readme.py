"""The README's Python snippets run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_only(
    reason="documentation and its examples: no device-specific computation"
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_readme_python_blocks_run(capsys) -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 2
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert "belief" in namespace and "info" in namespace
    assert "make run" in text and "make test" in text
