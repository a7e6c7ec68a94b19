"""Fixtures of the kernel-system solver tests (helpers live in ``iterative_support``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from iterative_support import SOLVERS, EntryCounter, Problem, build_problem

from pnsolve.iterative import KernelSystem


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Small problems: one thread (``tests/conftest.py``) for every test here."""


@pytest.fixture
def problem() -> Callable[..., Problem]:
    """Factory of :class:`Problem` (see :func:`build_problem`)."""
    return build_problem


@pytest.fixture(params=sorted(SOLVERS))
def make_solver(request: pytest.FixtureRequest) -> Callable[..., object]:
    """Each solver kind in turn: a factory taking the solver's keyword arguments."""
    return SOLVERS[request.param]


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Callable[[KernelSystem], EntryCounter]:
    """``counter(system)``: attach an :class:`EntryCounter` to ``system``."""
    return lambda system: EntryCounter(system, monkeypatch)
