"""Private backends of :class:`pnsolve.kernels.KernelMatrix` (one per file)."""

from .auto import choose_backend
from .chunked import ChunkedBackend
from .dense import DenseBackend
from .distributed import DistributedBackend
from .keops import KeOpsBackend

__all__ = [
    "ChunkedBackend",
    "DenseBackend",
    "DistributedBackend",
    "KeOpsBackend",
    "choose_backend",
]
