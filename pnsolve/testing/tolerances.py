"""Tolerances derived from dtypes: the one place tests take their thresholds from.

A tolerance is ``factor · eps(dtype)`` (or a power of it), with a named factor
that says what kind of computation it covers. Tests never write magic numbers.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "eps",
    "exact_tol",
    "iterative_tol",
    "krylov_tol",
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


def iterative_tol(dtype: torch.dtype) -> float:
    """Target relative residual that iterative solvers can reliably reach in ``dtype``.

    ``1e-10`` in float64, ``1e-4`` in float32 (about ``eps^0.6``).
    """
    return 10.0 ** round(0.625 * math.log10(eps(dtype)))


def rtol_for(dtype: torch.dtype) -> float:
    """Loose relative tolerance for agreement of two independent float implementations."""
    return math.sqrt(eps(dtype))


def statistical_threshold(false_alarm: float) -> float:
    """Two-sided standard-normal critical value ``z`` with ``P(|Z| > z) = false_alarm``."""
    if not 0 < false_alarm < 1:
        raise ValueError(f"false_alarm must lie in (0, 1), got {false_alarm}")
    from scipy.stats import norm

    return float(norm.isf(false_alarm / 2))
