"""The record every iterative method returns next to its result."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .stop_reason import StopReason

__all__ = ["IterationInfo"]


@dataclass(frozen=True, kw_only=True)
class IterationInfo:
    """How far an iterative method went, what it cost and why it stopped.

    The common base of :class:`~pnsolve.krylov.CGInfo` (``pn.cg``),
    :class:`~pnsolve.SolveInfo` (the probabilistic linear solver),
    :class:`~pnsolve.randomized.UlisseInfo` and the kernel-system solvers' info
    (:mod:`pnsolve.iterative`); each adds what is particular to its method.

    Attributes
    ----------
    iterations
        Iterations run.
    products
        Product calls with the system operator (a block of columns counts once).
    residual_norms
        Residual norm after each iteration, row 0 the initial one: shape
        ``(iterations + 1,)``, or ``(iterations + 1, k)`` for ``k`` right-hand sides.
    stop_reason
        Why the run ended.
    """

    iterations: int
    products: int
    residual_norms: torch.Tensor
    stop_reason: StopReason

    @property
    def success(self) -> bool:
        """Whether the run met its tolerance (``b = 0`` counts as met)."""
        return self.stop_reason in (StopReason.CONVERGED, StopReason.ZERO_RHS)
