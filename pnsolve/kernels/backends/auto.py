"""The rule behind ``backend="auto"``."""

from __future__ import annotations

import logging

import torch

from .keops_probe import keops_runs_on

__all__ = ["DENSE_LIMIT_BYTES", "choose_backend"]

logger = logging.getLogger("pnsolve.linops")

#: ``"auto"`` forms the matrix when it needs at most this many bytes (32 MiB).
DENSE_LIMIT_BYTES = 32 * 2**20


def choose_backend(
    n1: int, n2: int, dtype: torch.dtype, device: torch.device, *, keops: bool = True
) -> str:
    """Pick a backend for a ``(n1, n2)`` kernel matrix.

    1. ``"dense"`` if ``n1 · n2 · itemsize ≤ 32 MiB`` (a stored matvec is ~20× faster
       than recomputing ``exp`` per entry, and forming it once is cheap);
    2. ``"keops"`` on CUDA when pykeops imports and computes there (a child process
       checks one formula first, once per device:
       :func:`~pnsolve.kernels.backends.keops_probe.keops_runs_on`) and the kernel has a
       KeOps formula (``keops``; a wrapped GPyTorch kernel has none);
    3. ``"chunked"`` otherwise (on CPU the tiled torch backend was measured faster than
       KeOps).

    The choice is logged at INFO level on the ``pnsolve.linops`` logger.
    """
    nbytes = n1 * n2 * dtype.itemsize
    if nbytes <= DENSE_LIMIT_BYTES:
        choice, why = "dense", f"{nbytes / 2**20:.1f} MiB <= {DENSE_LIMIT_BYTES // 2**20} MiB"
    elif keops and device.type == "cuda" and keops_runs_on(device):
        choice, why = "keops", "CUDA device where pykeops computes"
    else:
        choice, why = "chunked", f"{nbytes / 2**20:.0f} MiB matrix on {device.type}"
    logger.info("KernelMatrix(%d x %d, %s): backend=%r (%s)", n1, n2, dtype, choice, why)
    return choice
