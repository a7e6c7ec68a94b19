"""Private backends of :class:`pnsolve.kernels.KernelMatrix` (one per file)."""

from .auto import choose_backend
from .chunked import ChunkedBackend
from .dense import DenseBackend
from .keops import KeOpsBackend

__all__ = ["ChunkedBackend", "DenseBackend", "KeOpsBackend", "choose_backend"]
