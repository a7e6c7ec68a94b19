"""Exceptions raised by pnsolve.

All of them subclass a built-in exception so that callers who only know the
standard library (``ValueError``, ``TypeError``, ``NotImplementedError``) can
still catch them.
"""

from __future__ import annotations

__all__ = [
    "BreakdownError",
    "MissingStructureError",
    "NotPositiveDefiniteError",
]


class NotPositiveDefiniteError(ValueError):
    """An operator that must be symmetric positive definite is not.

    Raised when a solver meets negative (or zero) curvature ``pᵀ A p ≤ 0`` along
    a search direction. The message names the iteration at which it was seen.

    Parameters
    ----------
    message
        Human-readable explanation.
    iteration
        Iteration (0-based) at which non-positive curvature was detected, if known.
    """

    def __init__(self, message: str, iteration: int | None = None) -> None:
        super().__init__(message)
        self.iteration = iteration


class BreakdownError(ArithmeticError):
    """A Krylov recurrence broke down (e.g. a zero or dependent direction)."""


class MissingStructureError(NotImplementedError):
    """An operation has no structured (matrix-free) implementation for an operator.

    pnsolve never densifies silently: call ``to_dense()`` explicitly if an n×n
    matrix is really what you want.
    """
