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

    @property
    def y(self) -> torch.Tensor:
        """Checked training targets, shape ``(n,)``."""
        return self._fitted().problem.y

    @property
    def K(self) -> LinearOperator:
        """Prior operator of the last fit, shape ``(C n, C n)``."""
        return self._fitted().problem.K

    @property
    def steps(self) -> tuple[NewtonStep, ...]:
        """One :class:`~pnsolve.gp.laplace.NewtonStep` per completed Newton step."""
        return self._fitted().steps

    @property
    def buffer(self) -> KrylovBuffer | None:
        """The Krylov buffer shared across Newton steps (``None`` without recycling)."""
        return self._fitted().buffer

    @property
    def weights(self) -> torch.Tensor:
        """``a = K⁻¹ (f − μ)`` at the current mode, shape ``(C n,)``."""
        return self._fitted().weights

    @property
    def A(self) -> LinearOperator:
        """The current Newton system operator, shape ``(C n, C n)``."""
        return self._fitted().A

    @property
    def belief(self) -> GaussianSolutionBelief:
        """The inner solver's current belief about the Newton system's solution."""
        return self._fitted().belief

    @property
    def converged(self) -> bool:
        """Whether the Newton loop stopped by meeting ``newton_tol``."""
        return self._fitted().converged

    @property
    def stop_reason(self) -> NewtonStopReason | None:
        """Why the Newton loop stopped (a ``str`` enum); ``None`` while it runs."""
        return self._fitted().stop_reason

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
