"""Every built-in stopping criterion against :class:`pnsolve.testing.contract.StoppingContract`."""

from __future__ import annotations

import torch

import pnsolve as pn
from pnsolve.testing.contract import StoppingContract


class TestMaxIterations(StoppingContract):
    def make(self, dtype):
        return pn.stopping.MaxIterations(5)


class TestResidualNorm(StoppingContract):
    def make(self, dtype):
        return pn.stopping.ResidualNorm(rtol=1e-3)


class TestMatvecBudget(StoppingContract):
    def make(self, dtype):
        return pn.stopping.MatvecBudget(6)


class TestPosteriorContraction(StoppingContract):
    def make(self, dtype):
        return pn.stopping.PosteriorContraction(torch.ones(12, dtype=dtype), rtol=1e-2)


class TestAnyOf(StoppingContract):
    def make(self, dtype):
        return pn.stopping.MaxIterations(20) | pn.stopping.ResidualNorm(rtol=1e-3)


class TestAllOf(StoppingContract):
    def make(self, dtype):
        return pn.stopping.MaxIterations(4) & pn.stopping.MatvecBudget(3)


class TestNot(StoppingContract):
    stops = False  # "not yet 5 iterations" stops at once or never, by design

    def make(self, dtype):
        return ~pn.stopping.MaxIterations(5)
