"""The error catalogue (``docs/errors.md``): every bad input class and what the user sees.

Each row of the page is one :class:`Case` below: the test runs it, checks the exception
type and that the message names the problem, and the page itself is rendered from the
messages the library actually produces — so the documentation cannot drift from the
behaviour. Regenerate the page after changing a message::

    .venv/bin/python tests/docs/test_error_catalogue.py
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator

import pytest
import torch
from error_cases_cli import CLI_CASES
from error_cases_models import MODEL_CASES
from error_cases_solvers import SOLVER_CASES
from error_catalogue_inputs import PAGE, ROOT, Case, CliExit

pytestmark = pytest.mark.cpu_only(
    reason="documentation and its examples: no device-specific computation"
)

#: every case, in the page's order (the areas in three modules, their inputs in a fourth)
CASES: dict[str, Case] = {**SOLVER_CASES, **MODEL_CASES, **CLI_CASES}


# ----------------------------------------------------------------------------- running
def _message(case: Case) -> str:
    """What the user sees: ``ExceptionType: first line of the message``."""
    try:
        case.run()
    except BaseException as err:
        if isinstance(err, CliExit):
            return str(err)
        first = str(err).splitlines()[0] if str(err) else ""
        return f"{type(err).__name__}: {first}"
    raise AssertionError("no error was raised")


def _machine_independent(message: str) -> str:
    """Drop what differs between checkouts: the folders a data set was looked for in."""
    return re.sub(r"\(looked in [^)]*\)", "(looked in the package and PNSOLVE_DATA)", message)


@contextlib.contextmanager
def _in_tmp() -> Iterator[None]:
    """Run in a fresh temporary folder (CLI cases write relative file names)."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        try:
            yield
        finally:
            os.chdir(old)


@pytest.mark.parametrize("cid", sorted(CASES))
def test_each_bad_input_gives_its_documented_error(cid):
    case = CASES[cid]
    with _in_tmp(), torch.no_grad(), pytest.raises(case.error, match=case.match):
        case.run()


def test_the_catalogue_covers_every_area_with_forty_cases():
    areas = {c.area for c in CASES.values()}
    expected = {"cg", "lanczos", "PLS", "ULISSE", "kernels", "GP models", "likelihoods"}
    expected |= {"datasets", "CLI", "checkpoints"}
    assert expected <= areas, expected - areas
    assert len(CASES) >= 40


def render() -> str:
    """The Markdown page: one table row per case, messages as the library prints them."""
    lines = [
        "# Error catalogue",
        "",
        "What pnsolve says for each class of bad input. Errors name the argument;",
        "`pn.NotPositiveDefiniteError` (a `ValueError`) reports detected non-SPD operators",
        "with the iteration; other bad input raises `ValueError` or `TypeError`. On the",
        "command line every error is one line on stderr with a non-zero exit status.",
        "",
        "Every row is a test (`tests/docs/test_error_catalogue.py`, id in the last",
        "column) and this page is rendered from the messages the library actually",
        "produces.",
        "",
        "| Area | Bad input | What you see | Test id |",
        "|---|---|---|---|",
    ]
    with _in_tmp(), torch.no_grad():
        for cid, case in CASES.items():
            msg = _machine_independent(_message(case)).replace("|", "\\|").replace("`", "'")
            lines.append(f"| {case.area} | {case.bad} | `{msg}` | `{cid}` |")
    return "\n".join(lines) + "\n"


def test_docs_page_matches_the_library():
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/errors.md is out of date: run .venv/bin/python tests/docs/test_error_catalogue.py"
    )


if __name__ == "__main__":  # regenerate docs/errors.md
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(CASES)} cases)", file=sys.stderr)
