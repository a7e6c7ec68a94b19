"""Precision facts derived from a dtype, shared by library defaults and tests."""

from __future__ import annotations

import math

import torch

__all__ = ["attainable_rtol"]


def attainable_rtol(dtype: torch.dtype) -> float:
    """Relative residual iterative solvers reliably reach in ``dtype`` (about ``eps^0.6``).

    ``1e-10`` in float64, ``1e-4`` in float32.
    """
    return 10.0 ** round(0.625 * math.log10(torch.finfo(dtype).eps))
