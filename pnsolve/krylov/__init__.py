"""Classic Krylov methods: conjugate gradients and the Lanczos process.

:func:`cg` is the SciPy-compatible front door (batched columns, per-column stopping,
residual replacement, typed :class:`CGInfo`); :func:`lanczos` returns the basis ``Q``
and tridiagonal ``T`` with optional full reorthogonalisation; :class:`KrylovBuffer`
recycles actions across systems ``K + D_t`` that share a fixed part.
``precision="mixed"`` (:data:`PRECISIONS`) runs the products of :func:`cg` and of the
probabilistic solvers in float32 through :class:`LowPrecisionProducts` while their
recurrences stay in float64.
"""

from .breakdown import RELIABLE_UPDATE_FACTOR
from .buffer import KrylovBuffer
from .cg_info import CGInfo
from .condition_monitor import MIXED_CONDITION_LIMIT, condition_limit
from .conjugate_gradient import cg
from .lanczos_process import LanczosResult, lanczos
from .mixed_precision import PRECISIONS, LowPrecisionProducts, low_precision_products
from .reorthogonalize import reorthogonalize

__all__ = [
    "MIXED_CONDITION_LIMIT",
    "PRECISIONS",
    "RELIABLE_UPDATE_FACTOR",
    "CGInfo",
    "KrylovBuffer",
    "LanczosResult",
    "LowPrecisionProducts",
    "cg",
    "condition_limit",
    "lanczos",
    "low_precision_products",
    "reorthogonalize",
]
