"""``K S`` for block-sparse ``S`` in one tiled pass over the kernel entries, with its backward.

A tile ``K[R, C]`` meets ``S`` only in the rows ``C``, each of which has one non-zero
entry (``values[c]`` in column ``block_of[c]``), so its contribution to ``(K S)[R, :]``
is a segment sum of ``K[R, C] ⊙ values[C]`` into the blocks of ``C``: ``O(|R| |C|)``
work, where a dense ``K @ S`` costs ``O(|R| |C| i)``. The backward pass recomputes each
tile once with autograd and takes, from the same tile, the gradient of the entries
(``Σ_r K[r, c] Ḡ[r, block_of[c]]``) and of the kernel's parameters (the tile contracted
with ``Ḡ[R, block_of[C]] ⊙ values[C]``): one forward and one backward pass per ELBO
step, memory ``O(tile + n i)``, never an ``n × n`` object. The ``"dense"`` and
``"chunked"`` backends use it; ``"keops"`` and ``"distributed"`` multiply their
operator with the dense ``(n, i)`` actions.
"""

from __future__ import annotations

from typing import Any

import torch

from ...kernels.backends.tiling import DEFAULT_MAX_MEMORY, dense_block, tile_shape
from ...kernels.base import StationaryKernel
from .segments import block_one_hot, by_matmul

__all__ = ["block_kernel_product"]


def _tile(n: int, itemsize: int, device: torch.device) -> tuple[int, int]:
    # the backward keeps about four tile-sized temporaries (tile, gathered Ḡ, products)
    return tile_shape(n, n, itemsize, max_memory=DEFAULT_MAX_MEMORY, num_buffers=4, device=device)


def block_kernel_product(
    kernel: StationaryKernel, X: torch.Tensor, values: torch.Tensor, block_of: torch.Tensor, i: int
) -> torch.Tensor:
    """``K(X, X) S`` for ``S[c, block_of[c]] = values[c]``; shape ``(n, i)``.

    Differentiable in ``values`` and in the kernel's parameters (not in ``X``).
    """
    params = [p for p in kernel.parameters() if p.requires_grad]
    tile = _tile(X.shape[0], X.element_size(), X.device)
    if torch.is_grad_enabled() and (values.requires_grad or params):
        return _BlockKernelProduct.apply(kernel, X, block_of, i, tile, values, *params)
    return _forward(kernel, X, values, block_of, i, tile)


def _forward(
    kernel: StationaryKernel,
    X: torch.Tensor,
    values: torch.Tensor,
    block_of: torch.Tensor,
    i: int,
    tile: tuple[int, int],
) -> torch.Tensor:
    n = X.shape[0]
    tr, tc = tile
    out = torch.zeros(n, i, dtype=X.dtype, device=X.device)
    # the same bits on every run: one-hot products off the CPU (see segments.py)
    P = block_one_hot(block_of, i, X.dtype) if by_matmul(X.device) else None
    with torch.no_grad():
        X = X.detach()
        for r0 in range(0, n, tr):
            r1 = min(n, r0 + tr)
            acc = out[r0:r1]
            for c0 in range(0, n, tc):
                c1 = min(n, c0 + tc)
                K = dense_block(kernel, X[r0:r1], X[c0:c1], self_offset=r0 - c0)
                if P is None:
                    acc.index_add_(1, block_of[c0:c1], K.mul_(values[c0:c1]))
                else:
                    acc.addmm_(K.mul_(values[c0:c1]), P[c0:c1])
    return out


class _BlockKernelProduct(torch.autograd.Function):
    """``K S`` (block-sparse ``S``) whose backward recomputes each tile once."""

    @staticmethod
    def forward(
        ctx: Any,
        kernel: StationaryKernel,
        X: torch.Tensor,
        block_of: torch.Tensor,
        i: int,
        tile: tuple[int, int],
        values: torch.Tensor,
        *params: torch.Tensor,
    ) -> torch.Tensor:
        ctx.kernel, ctx.tile = kernel, tile
        ctx.save_for_backward(X, block_of, values)
        return _forward(kernel, X, values.detach(), block_of, i, tile)

    @staticmethod
    def backward(ctx: Any, G: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        kernel: StationaryKernel = ctx.kernel
        X, block_of, values = ctx.saved_tensors
        need = ctx.needs_input_grad  # (kernel, X, block_of, i, tile, values, *params)
        params = [p for p in kernel.parameters() if p.requires_grad]
        want = [p for p, flag in zip(params, need[6:], strict=True) if flag]
        grad_values = torch.zeros_like(values) if need[5] else None
        grad_params = [torch.zeros_like(p) for p in want]
        n = X.shape[0]
        tr, tc = ctx.tile
        G, X, values = G.contiguous(), X.detach(), values.detach()
        for r0 in range(0, n, tr):
            r1 = min(n, r0 + tr)
            for c0 in range(0, n, tc):
                c1 = min(n, c0 + tc)
                Gc = G[r0:r1].index_select(1, block_of[c0:c1])  # Ḡ[r, block_of[c]]
                with torch.enable_grad():
                    index = torch.arange(r0 - c0, r1 - c0, device=X.device)
                    K = kernel._dense(X[r0:r1], X[c0:c1], self_index=index)
                    if want:
                        part = (K * (Gc * values[c0:c1])).sum()
                        for acc, g in zip(grad_params, torch.autograd.grad(part, want)):
                            acc += g
                if grad_values is not None:
                    grad_values[c0:c1] += (K.detach() * Gc).sum(0)
        it = iter(grad_params)
        grads = [next(it) if flag else None for flag in need[6:]]
        return (None, None, None, None, None, grad_values, *grads)
