"""Classic Krylov methods: conjugate gradients and the Lanczos process.

:func:`cg` is the SciPy-compatible front door (batched columns, per-column stopping,
residual replacement, typed :class:`CGInfo`); :func:`lanczos` returns the basis ``Q``
and tridiagonal ``T`` with optional full reorthogonalisation; :class:`KrylovBuffer`
recycles actions across systems ``K + D_t`` that share a fixed part.
"""

from .buffer import KrylovBuffer
from .cg_info import CGInfo
from .conjugate_gradient import cg
from .lanczos_process import LanczosResult, lanczos
from .reorthogonalize import reorthogonalize

__all__ = ["CGInfo", "KrylovBuffer", "LanczosResult", "cg", "lanczos", "reorthogonalize"]
