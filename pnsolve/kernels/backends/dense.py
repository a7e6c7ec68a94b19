"""The ``"dense"`` backend: form ``K(X1, X2)`` and multiply."""

from __future__ import annotations

import torch

from ..._core.statefile import version_counter
from ..kernel import Kernel
from .tiling import dense_block
from .vjp import recompute_vjp

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
        A matrix-free kernel (:attr:`~pnsolve.kernels.Kernel.matrix_free`).
    X1, X2
        Inputs, ``X2 = None`` meaning ``X1`` (symmetric, exact-zero self distances).
    self_offset
        With ``X2`` given: ``X1`` is rows ``self_offset, …`` of ``X2`` (a row block of a
        symmetric matrix); those self distances are exact zeros.
    """

    name = "dense"

    def __init__(
        self,
        kernel: Kernel,
        X1: torch.Tensor,
        X2: torch.Tensor | None,
        *,
        self_offset: int | None = None,
    ) -> None:
        self.kernel, self.X1, self.X2 = kernel, X1, X2
        self.self_offset = None if X2 is None else self_offset
        self._cached: tuple[tuple[tuple[int, int], ...], torch.Tensor] | None = None

    def _state(self) -> tuple[tuple[int, int], ...]:
        ts = [*self.kernel.parameters(), self.X1] + ([] if self.X2 is None else [self.X2])
        return tuple((id(t), version_counter(t)) for t in ts)

    def matrix(self) -> torch.Tensor:
        """``K(X1, X2)`` of shape ``(n1, n2)`` (inside the autograd graph when needed)."""
        ts = [*self.kernel.parameters(), self.X1] + ([] if self.X2 is None else [self.X2])
        if torch.is_grad_enabled() and any(t.requires_grad for t in ts):
            return self._form(self.X1, self.X2)
        state = self._state()
        if self._cached is None or self._cached[0] != state:
            with torch.no_grad():
                self._cached = (state, dense_block(self.kernel, self.X1, self.X2,
                                                   self_offset=self.self_offset))  # fmt: skip
        return self._cached[1]

    def _form(self, X1: torch.Tensor, X2: torch.Tensor | None) -> torch.Tensor:
        """``K(X1, X2)`` with autograd (self distances of a row block exact zeros)."""
        index = None
        if self.self_offset is not None:
            start = self.self_offset
            index = torch.arange(start, start + X1.shape[0], device=X1.device)
        return self.kernel._dense(X1, X2, self_index=index)

    def vjp(
        self, V: torch.Tensor, G: torch.Tensor, *, need_X1: bool, need_X2: bool
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, list[torch.Tensor]]:
        """Gradients of ``Σ G ⊙ (K V)`` (see :func:`~.vjp.recompute_vjp`)."""
        return recompute_vjp(
            lambda a, b, v: self._form(a, b) @ v, self.kernel, self.X1, self.X2, V, G,
            need_X1=need_X1, need_X2=need_X2,
        )  # fmt: skip

    def matmat(self, V: torch.Tensor) -> torch.Tensor:
        """``K @ V`` for ``V`` of shape ``(n2, k)``."""
        return self.matrix() @ V

    def rmatmat(self, V: torch.Tensor) -> torch.Tensor:
        """``Kᵀ @ V`` for ``V`` of shape ``(n1, k)``."""
        return self.matrix().mT @ V
