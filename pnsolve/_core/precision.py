"""Precision facts derived from a dtype; the guard keeping float32 products in full precision."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch

__all__ = ["attainable_rtol", "full_float32", "ieee_float32"]


def attainable_rtol(dtype: torch.dtype) -> float:
    """Relative residual iterative solvers reliably reach in ``dtype`` (about ``eps^0.6``).

    ``1e-10`` in float64, ``1e-4`` in float32.
    """
    return 10.0 ** round(0.625 * math.log10(torch.finfo(dtype).eps))


# ----------------------------------------------------------------------------------
# Full float32 in pnsolve's own products (no TF32 on CUDA, no bf16 through oneDNN).
#
# `torch.set_float32_matmul_precision("high")` (common in deep-learning code, and what
# Lightning suggests on Ampere and later GPUs) makes every float32 matmul on CUDA run in
# TF32, a 10-bit mantissa: a relative error of about 1e-3 per product, which stalls CG
# near 1e-3 and ruins float32 predictions (GPyTorch users met it as gpytorch#1960).
# "medium" also sends CPU float32 matmuls through oneDNN in bfloat16 on CPUs that have
# it. pnsolve's solvers, kernels and GP queries therefore run their products under
# `ieee_float32`, which sets the matmul precision of both backends to "ieee" for the
# duration of the call and restores the caller's setting afterwards.

_BACKENDS = ("cuda", "mkldnn")


def _matmul_flags() -> list[object]:
    """The ``torch.backends.<cuda|mkldnn>.matmul`` objects that carry ``fp32_precision``."""
    flags = []
    for name in _BACKENDS:
        matmul = getattr(getattr(torch.backends, name, None), "matmul", None)
        if matmul is not None and hasattr(matmul, "fp32_precision"):
            flags.append(matmul)
    return flags


_FLAGS = _matmul_flags()


@contextmanager
def ieee_float32() -> Iterator[None]:
    """Run the block with float32 matmuls in full IEEE float32 precision.

    Sets ``torch.backends.cuda.matmul.fp32_precision`` and its oneDNN (CPU) counterpart
    to ``"ieee"`` where they are not already, and restores the caller's values on exit
    (the new-style flags only: reading or writing the legacy ``allow_tf32`` after the
    new API was used raises in torch ≥ 2.9). Nested use costs two attribute reads.

    Notes
    -----
    The flags are process-wide: while a pnsolve call runs, float32 matmuls that *other
    threads* run concurrently are full precision too. Mixed precision is opt-in through
    the solvers' own arguments, never through these global flags.
    """
    saved = [(m, m.fp32_precision) for m in _FLAGS if m.fp32_precision != "ieee"]  # type: ignore[attr-defined]
    if not saved:
        yield
        return
    for m, _ in saved:
        m.fp32_precision = "ieee"  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for m, value in saved:
            m.fp32_precision = value  # type: ignore[attr-defined]


F = TypeVar("F", bound=Callable[..., Any])


def full_float32(fn: F) -> F:
    """Decorator: run ``fn`` under :func:`ieee_float32`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with ieee_float32():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
