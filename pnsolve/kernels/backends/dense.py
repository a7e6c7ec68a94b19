"""The ``"dense"`` backend: form ``K(X1, X2)`` and multiply."""

from __future__ import annotations

import torch

from ..base import StationaryKernel

__all__ = ["DenseBackend"]


class DenseBackend:
    """Products with an explicitly formed kernel matrix.

    Outside autograd (``torch.no_grad()`` or nothing requiring a gradient) the matrix is
    formed once and reused for as long as the kernel's parameters and the inputs are
    unchanged (checked through their version counters, which every in-place update such
    as an optimiser step bumps). When a gradient is needed the matrix is re-formed inside
    the graph for every product, so gradients always refer to the current parameters.

    Parameters
    ----------
    kernel
        A stationary kernel.
    X1, X2
        Inputs, ``X2 = None`` meaning ``X1`` (symmetric, exact-zero self distances).
    """

    name = "dense"

    def __init__(self, kernel: StationaryKernel, X1: torch.Tensor, X2: torch.Tensor | None) -> None:
        self.kernel, self.X1, self.X2 = kernel, X1, X2
        self._cached: tuple[tuple[tuple[int, int], ...], torch.Tensor] | None = None

    def _state(self) -> tuple[tuple[int, int], ...]:
        ts = [*self.kernel.parameters(), self.X1] + ([] if self.X2 is None else [self.X2])
        return tuple((id(t), t._version) for t in ts)

    def matrix(self) -> torch.Tensor:
        """``K(X1, X2)`` of shape ``(n1, n2)`` (inside the autograd graph when needed)."""
        ts = [*self.kernel.parameters(), self.X1] + ([] if self.X2 is None else [self.X2])
        if torch.is_grad_enabled() and any(t.requires_grad for t in ts):
            return self.kernel._dense(self.X1, self.X2)
        state = self._state()
        if self._cached is None or self._cached[0] != state:
            with torch.no_grad():
                self._cached = (state, self.kernel._dense(self.X1, self.X2))
        return self._cached[1]

    def matmat(self, V: torch.Tensor) -> torch.Tensor:
        """``K @ V`` for ``V`` of shape ``(n2, k)``."""
        return self.matrix() @ V

    def rmatmat(self, V: torch.Tensor) -> torch.Tensor:
        """``Kᵀ @ V`` for ``V`` of shape ``(n1, k)``."""
        return self.matrix().mT @ V
