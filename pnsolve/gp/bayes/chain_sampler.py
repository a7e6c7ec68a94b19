"""The resumable-run protocol shared by the hyperparameter samplers (SGLD, MH).

A sampler starts a run (:meth:`ChainSampler.start`), advances it in slices
(:meth:`ChainSampler.advance`, so chains can be checkpointed and interleaved) and
:meth:`ChainSampler.run` does both in one call and returns the run's result.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Generic, TypeVar

import torch

from ..._core.precision import full_float32

__all__ = ["ChainSampler"]

_State = TypeVar("_State")
_Result = TypeVar("_Result")


class ChainSampler(abc.ABC, Generic[_State, _Result]):
    """A Markov-chain sampler over hyperparameters ``θ`` (shape ``(p,)``), run in slices."""

    @abc.abstractmethod
    def start(self, theta0: torch.Tensor, iterations: int) -> _State:
        """A fresh run state of ``iterations`` steps from ``theta0``."""

    @abc.abstractmethod
    def advance(
        self,
        state: _State,
        count: int,
        generator: torch.Generator,
        *,
        callback: Callable[[int, torch.Tensor], object] | None = None,
    ) -> _State:
        """Take up to ``count`` more steps of ``state`` in place; returns it."""

    @abc.abstractmethod
    def _result(self, state: _State) -> _Result:
        """What :meth:`run` returns for a finished ``state``."""

    @full_float32
    def run(
        self,
        theta0: torch.Tensor,
        iterations: int,
        generator: torch.Generator,
        *,
        callback: Callable[[int, torch.Tensor], object] | None = None,
    ) -> _Result:
        """Run ``iterations`` steps from ``theta0`` (shape ``(p,)``) in one call.

        Parameters
        ----------
        theta0
            Starting point (Filippone & Engler 2015: a draw from ``N(MAP, M)``).
        iterations
            Number of steps (SGLD needs at least 2).
        generator
            Draws the sampler's own randomness (SGLD's injected noise, MH's proposals
            and acceptances; a gradient estimator has its own).
        callback
            Called as ``callback(t, θ_t)`` after every step (progress bars).

        Returns
        -------
        object
            The sampler's result for the finished run (:class:`SGLDResult` for SGLD,
            the final :class:`MHState` for Metropolis–Hastings).
        """
        state = self.start(theta0, iterations)
        return self._result(self.advance(state, iterations, generator, callback=callback))
