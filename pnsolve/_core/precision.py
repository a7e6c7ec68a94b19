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


def _legacy_precision() -> str | None:
    """``torch.get_float32_matmul_precision()``, or ``None`` where torch refuses to say.

    Torch refuses where the caller mixed the legacy and the per-backend API.
    """
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return None


_FULL = ("ieee", "none")  # "none": the backend follows the legacy setting


@contextmanager
def ieee_float32() -> Iterator[None]:
    """Run the block with float32 matmuls in full IEEE float32 precision.

    Where the caller lowered the precision, the block runs with
    ``torch.set_float32_matmul_precision("highest")`` (which sets the per-backend
    ``torch.backends.<cuda|mkldnn>.matmul.fp32_precision`` to ``"ieee"`` as well), and
    any per-backend flag still lowered is set to ``"ieee"``; on exit both are restored
    in reverse order. The legacy and the per-backend settings stay consistent inside
    the block, so code called back from it (a user's callback or operator) may read
    either, e.g. ``torch.backends.cuda.matmul.allow_tf32``, as torch ≥ 2.9 only allows
    when they agree. Where the caller's precision is already full, the guard costs a
    few attribute reads.

    Notes
    -----
    The flags are process-wide. While a pnsolve call runs, float32 matmuls that *other
    threads* run concurrently are full precision too; and where two threads run
    pnsolve calls at once, the one that finishes first restores the caller's setting
    while the other still runs, whose remaining products then follow that setting. In
    multithreaded code with a lowered precision, call
    ``torch.set_float32_matmul_precision("highest")`` around pnsolve work yourself.
    Mixed precision is opt-in through the solvers' own arguments, never through these
    global flags.
    """
    legacy = _legacy_precision()
    saved = [(m, m.fp32_precision) for m in _FLAGS]  # type: ignore[attr-defined]
    lowered_legacy = legacy is not None and legacy != "highest"
    if not lowered_legacy and all(value in _FULL for _, value in saved):
        yield
        return
    if lowered_legacy:
        torch.set_float32_matmul_precision("highest")
    for m, _ in saved:
        if m.fp32_precision not in _FULL:  # type: ignore[attr-defined]
            m.fp32_precision = "ieee"  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if lowered_legacy:
            torch.set_float32_matmul_precision(legacy)  # type: ignore[arg-type]
        for m, value in saved:
            if m.fp32_precision != value:  # type: ignore[attr-defined]
                m.fp32_precision = value  # type: ignore[attr-defined]


F = TypeVar("F", bound=Callable[..., Any])


def full_float32(fn: F) -> F:
    """Decorator: run ``fn`` under :func:`ieee_float32`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with ieee_float32():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
