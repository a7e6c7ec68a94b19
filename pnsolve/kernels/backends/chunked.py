"""The ``"chunked"`` backend: torch tiles under a memory cap, with a tile-recomputing backward.

Forward products run :func:`~.tiling.tiled_matmat` under ``no_grad``. When anything
requires a gradient, products go through :class:`_TiledKernelMatmul`, whose backward
recomputes each tile with autograd enabled and accumulates the gradients of
``Σ G ⊙ (K V)`` tile by tile: no tile is ever stored, so memory stays
``O(tile + n·(d + k))`` in the backward pass too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..._core.row_halves import max_parts
from ..kernel import Kernel
from .tiling import DEFAULT_MAX_MEMORY, tile_shape, tiled_matmat

__all__ = ["ChunkedBackend"]


class ChunkedBackend:
    """Matrix-free tiled products with ``K(X1, X2)``.

    Parameters
    ----------
    kernel
        A matrix-free kernel (:attr:`~pnsolve.kernels.Kernel.matrix_free`).
    X1, X2
        Inputs, ``X2 = None`` meaning ``X1`` (symmetric).
    max_memory
        Cap on the bytes of tile buffers in the forward pass (the backward uses roughly
        ten tile-sized temporaries).
    tile
        Requested ``(rows, cols)`` before the memory cap is applied.
    self_offset
        With ``X2`` given: ``X1`` is rows ``self_offset, …`` of ``X2`` (a row block of a
        symmetric matrix, as the ``"distributed"`` backend uses); those self distances
        are exact zeros, as with ``X2 = None``.
    """

    name = "chunked"

    def __init__(
        self,
        kernel: Kernel,
        X1: torch.Tensor,
        X2: torch.Tensor | None,
        *,
        max_memory: int = DEFAULT_MAX_MEMORY,
        tile: tuple[int, int] | None = None,
        self_offset: int | None = None,
    ) -> None:
        self.kernel, self.X1, self.X2 = kernel, X1, X2
        self.self_offset = None if X2 is None else self_offset
        n2 = X1.shape[0] if X2 is None else X2.shape[0]
        nbuf = 1 + kernel.tile_buffers
        size = max(X1.shape[0], n2)
        #: Row parts of a forward product, one thread each (the intra-op thread count at
        #: construction on the CPU; each part has its own buffers, within ``max_memory``).
        self.parts = min(torch.get_num_threads(), max_parts()) if X1.device.type == "cpu" else 1
        self.tile = tile_shape(
            size,
            size,
            X1.element_size(),
            tile=tile,
            max_memory=max_memory,
            num_buffers=nbuf * self.parts,
            device=X1.device,
        )
        #: Filled by each product: ``buffer_elements`` (largest tile buffer) and ``tiles``.
        self.stats: dict[str, int] = {}

    def matmat(self, V: torch.Tensor) -> torch.Tensor:
        """``K(X1, X2) @ V`` for ``V`` of shape ``(n2, k)``."""
        return self._product(self.X1, self.X2, V, self.self_offset)

    def rmatmat(self, V: torch.Tensor) -> torch.Tensor:
        """``K(X1, X2)ᵀ @ V = K(X2, X1) @ V`` for ``V`` of shape ``(n1, k)``."""
        if self.X2 is None:
            return self._product(self.X1, None, V, None)
        offset = None if self.self_offset is None else -self.self_offset
        return self._product(self.X2, self.X1, V, offset)

    def _product(
        self, X1: torch.Tensor, X2: torch.Tensor | None, V: torch.Tensor, offset: int | None
    ) -> torch.Tensor:
        params = [p for p in self.kernel.parameters() if p.requires_grad]
        tensors = [X1, V, *params] + ([] if X2 is None else [X2])
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return _TiledKernelMatmul.apply(self, offset, X1, X2, V, *params)
        return tiled_matmat(
            self.kernel, X1, X2, V, self.tile, stats=self.stats, self_offset=offset,
            parts=self.parts,
        )  # fmt: skip

    def vjp(
        self, V: torch.Tensor, G: torch.Tensor, *, need_X1: bool, need_X2: bool
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, list[torch.Tensor]]:
        """Gradients of ``Σ G ⊙ (K(X1, X2) V)`` without ``Kᵀ G`` (tile by tile, no graph).

        Returns ``(grad_X1, grad_X2, grads)``: ``grad_X1`` if ``need_X1`` (with ``X2 =
        None`` it holds both sides), ``grad_X2`` if ``need_X2`` and ``X2`` is given, and
        one gradient per kernel parameter that requires one (in ``parameters()`` order).
        """
        X1, X2 = self.X1, self.X2
        params = [p for p in self.kernel.parameters() if p.requires_grad]
        grad_X1 = torch.zeros_like(X1) if need_X1 else None
        grad_X2 = torch.zeros_like(X2) if (X2 is not None and need_X2) else None
        grad_p = [torch.zeros_like(p) for p in params]
        if grad_X1 is not None or grad_X2 is not None or params:
            _accumulate(
                self.kernel, X1, X2, V, G.contiguous(), self.tile, grad_X1, grad_X2, params,
                grad_p, self.self_offset,
            )  # fmt: skip
        return grad_X1, grad_X2, grad_p


class _TiledKernelMatmul(torch.autograd.Function):
    """``K(X1, X2; θ) @ V`` with a backward that recomputes tiles (no stored tiles)."""

    @staticmethod
    def forward(
        ctx: Any,
        backend: ChunkedBackend,
        offset: int | None,
        X1: torch.Tensor,
        X2: torch.Tensor | None,
        V: torch.Tensor,
        *params: torch.Tensor,
    ) -> torch.Tensor:
        ctx.backend, ctx.offset = backend, offset
        ctx.save_for_backward(X1, X2, V)
        return tiled_matmat(
            backend.kernel, X1, X2, V, backend.tile, stats=backend.stats, self_offset=offset,
            parts=backend.parts,
        )  # fmt: skip

    @staticmethod
    def backward(ctx: Any, G: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        backend: ChunkedBackend = ctx.backend
        kernel, offset = backend.kernel, ctx.offset
        X1, X2, V = ctx.saved_tensors
        need = ctx.needs_input_grad  # (backend, offset, X1, X2, V, *params)
        params = [p for p in kernel.parameters() if p.requires_grad]
        need_params = [bool(n) for n in need[5:]]
        G = G.contiguous()
        grad_V = None
        if need[4]:  # Kᵀ G: K(X2, X1), every kernel being symmetric in its arguments
            back = None if offset is None else -offset
            with torch.no_grad():
                grad_V = tiled_matmat(
                    kernel, X1 if X2 is None else X2, None if X2 is None else X1, G,
                    backend.tile, self_offset=back, parts=backend.parts,
                )  # fmt: skip
        grad_X1 = torch.zeros_like(X1) if need[2] else None
        grad_X2 = torch.zeros_like(X2) if (X2 is not None and need[3]) else None
        grad_p = [torch.zeros_like(p) if n else None for p, n in zip(params, need_params)]
        if need[2] or need[3] or any(need_params):
            _accumulate(
                kernel, X1, X2, V, G, backend.tile, grad_X1, grad_X2, params, grad_p, offset
            )
        return (None, None, grad_X1, grad_X2, grad_V, *grad_p)


def _accumulate(
    kernel: Kernel,
    X1: torch.Tensor,
    X2: torch.Tensor | None,
    V: torch.Tensor,
    G: torch.Tensor,
    tile: tuple[int, int],
    grad_X1: torch.Tensor | None,
    grad_X2: torch.Tensor | None,
    params: Sequence[torch.Tensor],
    grad_p: Sequence[torch.Tensor | None],
    self_offset: int | None = None,
) -> None:
    """Add the gradients of ``Σ_tiles Σ G_t ⊙ (K_t V_t)`` to the ``grad_*`` buffers in place.

    ``self_offset`` (with ``X2`` given) marks row ``i`` of ``X1`` as row ``i +
    self_offset`` of ``X2``: exact-zero distances there, as with ``X2 = None``.
    """
    sym = X2 is None
    offset = 0 if sym else self_offset
    Xc = X1 if X2 is None else X2
    n1, n2 = X1.shape[0], Xc.shape[0]
    tr, tc = tile
    want_p = [(p, g) for p, g in zip(params, grad_p) if g is not None]
    for r0 in range(0, n1, tr):
        r1 = min(n1, r0 + tr)
        for c0 in range(0, n2, tc):
            c1 = min(n2, c0 + tc)
            with torch.enable_grad():
                xr = X1[r0:r1].detach().requires_grad_(grad_X1 is not None)
                want_c = grad_X1 is not None if sym else grad_X2 is not None
                xc = Xc[c0:c1].detach().requires_grad_(want_c)
                index = None
                if offset is not None:
                    index = torch.arange(r0 + offset - c0, r1 + offset - c0, device=X1.device)
                K = kernel._dense(xr, xc, self_index=index)
                s = (torch.mm(K, V[c0:c1]) * G[r0:r1]).sum()
                inputs = [t for t in (xr, xc) if t.requires_grad] + [p for p, _ in want_p]
                grads = torch.autograd.grad(s, inputs, allow_unused=True)
            it = iter(grads)
            if grad_X1 is not None:  # exactly when xr requires grad
                _add(grad_X1[r0:r1], next(it))
            target = grad_X1 if sym else grad_X2
            if target is not None:  # exactly when xc requires grad
                _add(target[c0:c1], next(it))
            for _, g in want_p:
                _add(g, next(it))


def _add(acc: torch.Tensor, g: torch.Tensor | None) -> None:
    if g is not None:
        acc.add_(g)
