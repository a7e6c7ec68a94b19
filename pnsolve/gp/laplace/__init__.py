"""The pieces of :class:`~pnsolve.gp.IterNCGP`'s Laplace approximation.

:func:`laplace_problem` checks the data and builds the operators (:class:`LaplaceProblem`);
:func:`newton_loop` runs the Newton (outer) loop and yields a frozen
:class:`LaplaceState` per inner iteration and per Newton step, ending with a
:class:`NewtonStopReason`; :func:`halve_step` is its step-size search on the Laplace
objective (:func:`laplace_objective`); :func:`latent_posterior` and
:func:`predict_from_posterior` answer queries about a state.
"""

from .line_search import MAX_HALVINGS, halve_step, laplace_objective
from .newton import check_newton_config, newton_loop, newton_system
from .prediction import latent_posterior, predict_from_posterior
from .problem import LaplaceProblem, laplace_problem, latent_kernel
from .state import LaplaceState, NewtonStep, NewtonStopReason, newton_record

__all__ = [
    "MAX_HALVINGS",
    "LaplaceProblem",
    "LaplaceState",
    "NewtonStep",
    "NewtonStopReason",
    "check_newton_config",
    "halve_step",
    "laplace_objective",
    "laplace_problem",
    "latent_kernel",
    "latent_posterior",
    "newton_loop",
    "newton_record",
    "newton_system",
    "predict_from_posterior",
]
