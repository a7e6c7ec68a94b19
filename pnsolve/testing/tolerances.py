"""Tolerances derived from dtypes: the one place tests take their thresholds from.

A tolerance is ``factor · eps(dtype)`` (or a power of it), with a named factor
that says what kind of computation it covers. Tests never write magic numbers.
"""

from __future__ import annotations

import math

import torch

from .._core.precision import attainable_rtol

__all__ = [
    "conjugacy_tol",
    "eps",
    "exact_tol",
    "iterative_tol",
    "krylov_tol",
    "peer_tol",
    "rtol_for",
    "statistical_threshold",
]


def eps(dtype: torch.dtype) -> float:
    """Machine epsilon of a floating dtype."""
    return float(torch.finfo(dtype).eps)


def exact_tol(dtype: torch.dtype, n: int = 1) -> float:
    """Relative tolerance for direct computations of size ``n`` (products, sums, to_dense).

    Grows like ``√n`` (random-walk accumulation of rounding errors) with a safety factor.
    """
    return 50.0 * eps(dtype) * max(1.0, math.sqrt(n))


def krylov_tol(dtype: torch.dtype, cond: float = 1.0) -> float:
    """Relative tolerance for a quantity computed by a converged Krylov method.

    Scales with the condition number ``cond`` of the system: forward errors of a
    backward-stable solve are ``O(κ eps)``.
    """
    return 1e3 * eps(dtype) * max(1.0, cond)


def conjugacy_tol(dtype: torch.dtype, cond: float = 1.0, n: int = 1) -> float:
    """Tolerance on ``‖Vᵀ A V − I‖_max`` for a solver's ``A``-orthonormal directions.

    The solver keeps a recursive image ``A v`` while its estimated relative error stays
    below ``√eps`` (:func:`pnsolve.solvers.update.image_tolerance`), and a fresh
    product of a unit-``A``-norm direction of size ``n`` carries about ``eps · κ · √n``
    (``‖A‖ ‖v‖ / ‖A v‖ ≤ κ``, rounding accumulated over ``n`` terms); the factor 10
    covers their accumulation over a block. ``1.5e-7`` in float64 at moderate ``κ``.
    """
    e = eps(dtype)
    return 10.0 * (math.sqrt(e) + 10.0 * e * max(1.0, cond) * math.sqrt(max(1, n)))


def iterative_tol(dtype: torch.dtype) -> float:
    """Target relative residual that iterative solvers can reliably reach in ``dtype``.

    ``1e-10`` in float64, ``1e-4`` in float32 (about ``eps^0.6``).
    """
    return attainable_rtol(dtype)


def rtol_for(dtype: torch.dtype) -> float:
    """Loose relative tolerance for agreement of two independent float implementations."""
    return math.sqrt(eps(dtype))


def peer_tol(dtype: torch.dtype) -> float:
    """Relative tolerance for agreement with a peer solver that does not keep conjugacy.

    For example probnum's matrix-based ``problinsolve``, whose iterate after ``n``
    steps is accurate to about 1e-7 in float64 at condition number 10.

    ``eps^(1/3)``: ``6e-6`` in float64, ``5e-3`` in float32.
    """
    return eps(dtype) ** (1.0 / 3.0)


def statistical_threshold(false_alarm: float) -> float:
    """Two-sided standard-normal critical value ``z`` with ``P(|Z| > z) = false_alarm``."""
    if not 0 < false_alarm < 1:
        raise ValueError(f"false_alarm must lie in (0, 1), got {false_alarm}")
    from scipy.stats import norm

    return float(norm.isf(false_alarm / 2))
