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

from collections.abc import Sequence
from typing import Any, TypeGuard

import torch

from ...kernels.backends.tiling import DEFAULT_MAX_MEMORY, dense_block, tile_shape
from ...kernels.base import StationaryKernel
from ...kernels.kernel import Kernel
from .segments import block_one_hot, by_matmul

__all__ = ["block_kernel_product"]


def _tile(n: int, itemsize: int, device: torch.device) -> tuple[int, int]:
    # the backward keeps about four tile-sized temporaries (tile, gathered Ḡ, products)
    return tile_shape(n, n, itemsize, max_memory=DEFAULT_MAX_MEMORY, num_buffers=4, device=device)


def block_kernel_product(
    kernel: Kernel, X: torch.Tensor, values: torch.Tensor, block_of: torch.Tensor, i: int
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
    kernel: Kernel,
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
        kernel: Kernel,
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
        kernel: Kernel = ctx.kernel
        X, block_of, values = ctx.saved_tensors
        need = ctx.needs_input_grad  # (kernel, X, block_of, i, tile, values, *params)
        params = [p for p in kernel.parameters() if p.requires_grad]
        want = [p for p, flag in zip(params, need[6:], strict=True) if flag]
        grad_values = torch.zeros_like(values) if need[5] else None
        G, X, values = G.contiguous(), X.detach(), values.detach()
        if _analytic(kernel):
            got = iter(
                _analytic_backward(kernel, X, block_of, values, G, ctx.tile, grad_values, want)
            )
            grads = [next(got) if flag else None for flag in need[6:]]
            return (None, None, None, None, None, grad_values, *grads)
        grad_params = [torch.zeros_like(p) for p in want]
        n = X.shape[0]
        tr, tc = ctx.tile
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


def _analytic(kernel: Kernel) -> TypeGuard[StationaryKernel]:
    """Whether the backward can use the kernel's closed-form slope ``dκ/dr²``.

    For stationary kernels whose only parameters are the lengthscale and outputscale and
    whose profile has a finite slope (RBF, Matérn 3/2 and 5/2); otherwise (other
    families, expressions) autograd recomputes each tile.
    """
    if not isinstance(kernel, StationaryKernel):
        return False
    own = {id(kernel.raw_lengthscale), id(kernel.raw_outputscale)}
    return kernel.has_profile_slope and all(id(p) in own for p in kernel.parameters())


def _analytic_backward(
    kernel: StationaryKernel,
    X: torch.Tensor,
    block_of: torch.Tensor,
    values: torch.Tensor,
    G: torch.Tensor,
    tile: tuple[int, int],
    grad_values: torch.Tensor | None,
    want: Sequence[torch.Tensor],
) -> list[torch.Tensor | None]:
    """The backward of ``K S`` by closed-form tile gradients; fills ``grad_values``.

    With ``Ḡ_c = G[:, block_of[c]]``, ``k = σ² κ(r²)`` and ``z = x / ℓ``: the gradient
    in ``values[c]`` is ``Σ_r Ḡ_rc K_rc``; in ``σ²`` it is ``Σ_rc Ḡ_rc κ_rc values_c``;
    in ``ℓ_d`` it is ``−(2σ²/ℓ_d) Σ_rc D_rc (z_rd − z_cd)²`` with
    ``D = Ḡ ⊙ κ'(r²) ⊙ values``, summed as ``Σ_r z_rd² (D1)_r + Σ_c z_cd² (Dᵀ1)_c −
    2 Σ_r z_rd (D z)_rd`` (one GEMM, the expansion the dense autograd path differentiates
    too). Returns the gradients of ``want`` (the raw parameters), chained through their
    parametrisation.
    """
    n = X.shape[0]
    tr, tc = tile
    with torch.no_grad():
        Z = kernel.scale_inputs(X)
        Z2 = Z * Z
        scale = kernel.outputscale_like(X)
        g_scale = X.new_zeros(())
        g_q = X.new_zeros(Z.shape[1])  # Σ_rc D_rc (z_rd − z_cd)², per dimension
        sq = Z2.sum(1, keepdim=True)  # ‖z‖², (n, 1)
        for r0 in range(0, n, tr):
            r1 = min(n, r0 + tr)
            for c0 in range(0, n, tc):
                c1 = min(n, c0 + tc)
                # r² in place: ‖z_r‖² − 2 z_r·z_c + ‖z_c‖², self distances exact zeros
                r2 = torch.addmm(sq[r0:r1], Z[r0:r1], Z[c0:c1].mT, alpha=-2.0)
                r2.add_(sq[c0:c1].mT).clamp_min_(0.0)
                r2.diagonal(r0 - c0).zero_()  # entries (a, a + r0 − c0): the same point
                kappa, slope = kernel.profile_slope_(r2)
                Gc = G[r0:r1].index_select(1, block_of[c0:c1])  # Ḡ[r, block_of[c]]
                v = values[c0:c1]
                if isinstance(slope, float):  # dκ/dr² = slope · κ
                    D = Gc.mul_(kappa)
                    col = D.sum(0)
                    D.mul_(v if slope == 1.0 else v * slope)
                else:
                    col = kappa.mul_(Gc).sum(0)
                    D = slope.mul_(Gc).mul_(v)
                if grad_values is not None:
                    grad_values[c0:c1] += scale * col
                g_scale += col @ v
                g_q += D.sum(1) @ Z2[r0:r1] + D.sum(0) @ Z2[c0:c1]
                g_q -= 2.0 * (Z[r0:r1] * (D @ Z[c0:c1])).sum(0)
        ls = kernel.lengthscale.to(dtype=X.dtype, device=X.device)
        g_ls = -2.0 * scale * g_q / ls  # per dimension (ls broadcasts when scalar)
        if ls.ndim == 0:
            g_ls = g_ls.sum()
    if not want:
        return []
    with torch.enable_grad():
        ls_p, os_p = kernel.lengthscale, kernel.outputscale
        return list(
            torch.autograd.grad(
                [ls_p, os_p],
                want,
                grad_outputs=[g_ls.to(ls_p), g_scale.to(os_p)],
                allow_unused=True,
            )
        )
