"""IterNCGP's fit record and what it reads out of it (a mixin of :class:`~pnsolve.gp.IterNCGP`).

The Newton loop's last :class:`~pnsolve.gp.laplace.LaplaceState` is the fit; the inputs
it ran on carry its :class:`~pnsolve.gp.fit_state.Provenance`. Every read-out checks the
provenance first and runs the loop again when a hyperparameter changed since.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ...beliefs.gaussian_solution import GaussianSolutionBelief
from ...krylov.buffer import KrylovBuffer
from ...linops.base import LinearOperator
from .._fitted import readout
from ..fit_state import Provenance, tie
from ..posterior import GaussianPosterior
from .state import LaplaceState, NewtonStep, NewtonStopReason

__all__ = ["FitInputs", "LaplaceFit"]


class LaplaceFit:
    """The fit record of a Newton-loop model and its read-outs.

    The model sets ``_state`` (the loop's last state), ``_fit_inputs``
    (:class:`FitInputs`) and ``_f_cache``, names its sources in ``_sources`` and
    refits through ``fit``.
    """

    _state: LaplaceState | None
    _fit_inputs: FitInputs | None
    _f_cache: tuple[LaplaceState, torch.Tensor] | None
    _sources: Callable[[], dict[str, object]]
    fit: Callable[..., Any]

    @property
    def state(self) -> LaplaceState | None:
        """The last state of the Newton loop (``None`` before :meth:`fit`)."""
        return self._state

    def _fitted(self) -> LaplaceState:
        """The loop's last state, after the check against the fit's provenance.

        The Newton loop runs again first if a hyperparameter changed since the fit;
        training data written in place are refused.
        """
        inputs = self._fit_inputs
        if self._state is None or inputs is None:
            raise RuntimeError("call fit(X, y) before asking for a posterior")
        inputs.provenance.check(
            self._sources(),
            refit=lambda: self.fit(inputs.X, inputs.y, generator=inputs.generator, K=inputs.K),
        )
        assert self._state is not None
        return self._state

    def _tie(self, post: GaussianPosterior, provenance: Provenance) -> GaussianPosterior:
        """Make ``post`` refuse its on-demand parts once the fit of ``provenance`` is stale."""
        return tie(post, provenance, self._current_provenance, self._sources)

    def _current_provenance(self) -> Provenance | None:
        return None if self._fit_inputs is None else self._fit_inputs.provenance

    @property
    def X(self) -> torch.Tensor | None:
        """Training inputs of the last fit, shape ``(n, d)`` (``None`` before a fit)."""
        return None if self._state is None else self._state.problem.X

    y: torch.Tensor = readout("problem.y")
    """Checked training targets, shape ``(n,)``."""

    K: LinearOperator = readout("problem.K")
    """Prior operator of the last fit, shape ``(C n, C n)``."""

    steps: tuple[NewtonStep, ...] = readout("steps")
    """One :class:`~pnsolve.gp.laplace.NewtonStep` per completed Newton step."""

    buffer: KrylovBuffer | None = readout("buffer")
    """The Krylov buffer shared across Newton steps (``None`` without recycling)."""

    weights: torch.Tensor = readout("weights")
    """``a = K⁻¹ (f − μ)`` at the current mode, shape ``(C n,)``."""

    A: LinearOperator = readout("A")
    """The current Newton system operator, shape ``(C n, C n)``."""

    belief: GaussianSolutionBelief = readout("belief")
    """The inner solver's current belief about the Newton system's solution."""

    converged: bool = readout("converged")
    """Whether the Newton loop stopped by meeting ``newton_tol``."""

    stop_reason: NewtonStopReason | None = readout("stop_reason")
    """Why the Newton loop stopped (a ``str`` enum); ``None`` while it runs."""

    @property
    def f(self) -> torch.Tensor:
        """Latent mode ``μ + K a`` at the training inputs, shape ``(n,)`` or ``(n, C)``.

        For the softmax the Newton loop only tracks the projected part ``P (f − μ)``
        (the likelihood is blind to the rest); the full mode costs one product with
        ``K`` on first access (cached for the current state).
        """
        state = self._fitted()
        if self._f_cache is None or self._f_cache[0] is not state:
            problem = state.problem
            flat = problem.mean + (
                state.h if problem.projector is None else problem.K @ state.weights
            )
            self._f_cache = (state, problem.likelihood.unflatten(flat))
        return self._f_cache[1]


@dataclass(frozen=True)
class FitInputs:
    """What :meth:`IterNCGP.fit` ran on: provenance, data, generator and prior operator."""

    provenance: Provenance
    X: torch.Tensor
    y: torch.Tensor
    generator: torch.Generator | None
    K: LinearOperator | None
