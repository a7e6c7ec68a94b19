"""Fixtures of the kernel-system solver tests (helpers live in ``iterative_support``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from iterative_support import SOLVERS, EntryCounter, Problem, build_problem

from pnsolve.iterative import KernelSystem


@pytest.fixture
def problem() -> Callable[..., Problem]:
    """Factory of :class:`Problem` (see :func:`build_problem`)."""
    return build_problem


@pytest.fixture(params=sorted(SOLVERS))
def make_solver(request: pytest.FixtureRequest) -> Callable[..., object]:
    """Each solver kind in turn: a factory taking the solver's keyword arguments."""
    return SOLVERS[request.param]


@pytest.fixture(autouse=True)
def _one_thread():
    """Small problems: one thread avoids OpenMP contention on the shared 2-core runners."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Callable[[KernelSystem], EntryCounter]:
    """``counter(system)``: attach an :class:`EntryCounter` to ``system``."""
    return lambda system: EntryCounter(system, monkeypatch)
