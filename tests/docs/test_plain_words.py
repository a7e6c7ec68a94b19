"""What users read carries no internal jargon.

Docs, the README and CONTRIBUTING, tutorials, benchmarks' output and comments, CLI help
and the package's docstrings and messages cite papers by author and year and say
things in plain words: never "seed 000" (the papers were filed by number), "the seed's"
value, "DESIGN §5" (a design note users do not have) or "issue 12". A random-number
seed (``--seed``, ``manual_seed(0)``, "seed 0") is not jargon.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cpu_only(reason="reads text files: nothing runs on a device")

#: phrases that name internal documents, not what a user can look up
JARGON = re.compile(
    r"(?i:\bseed[ -]?00\d|\bseed'?s (?:own|paper|eq|fig|table|appendix|value|setting|rate"
    r"|threshold|choice|algorithm|run|learning)|\(seed: [\d.]|\bthe seed\b(?! (?:0|1|=|of"
    r" the generator|value))|\bissue \d+|\bthe issue\b)|\bDESIGN(?:\.md)? ?§|\bDESIGN\.md\b"
)

FOLDERS = ("docs", "tutorials", "benchmarks", "pnsolve")
FILES = ("README.md", "CONTRIBUTING.md")


def _texts() -> list[Path]:
    paths = [ROOT / f for f in FILES if (ROOT / f).exists()]
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".md", ".py") and "__pycache__" not in path.parts:
                paths.append(path)
    return paths


def test_user_facing_text_has_no_internal_jargon() -> None:
    hits = []
    for path in _texts():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if JARGON.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not hits, "internal jargon where users read:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "line",
    ["as in seed 000 §5.1", "(seed: 0.002)", "DESIGN §6", "see issue 12", "the seed's threshold"],
)
def test_the_pattern_catches_jargon(line: str) -> None:
    assert JARGON.search(line)


@pytest.mark.parametrize(
    "line",
    ["pnsolve sample --seed 0", "torch.Generator().manual_seed(3)", "a seed of the generator",
     "chains from the seed 0"],
)  # fmt: skip
def test_the_pattern_spares_random_seeds(line: str) -> None:
    assert not JARGON.search(line)
