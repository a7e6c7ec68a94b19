"""Tiled, no-autograd kernel products ``K(X1, X2) @ V`` that never form ``K``.

Each tile is filled in place in a reused buffer by the kernel's
:meth:`~pnsolve.kernels.Kernel.fill_tile_` from per-point operands computed once per
product (:meth:`~pnsolve.kernels.Kernel.tile_operands`) and accumulated with
``addmm_``; the kernel's ``tile_scale`` multiplies the result once. A sum or product of
kernels fills its parts into scratch tiles and combines them there: one pass over the
tiles for the whole expression. For a stationary kernel the tile is one GEMM of
*augmented* inputs ``A = [−2c z1, c‖z1‖², c]`` and ``B = [z2, 1, ‖z2‖²]`` (``A Bᵀ = c ·
r²``), clamped at zero when ``c > 0`` (square-root profiles) and turned into kernel
values by its ``profile_``. Per entry: the GEMM write, a clamp of the exponent at
:func:`~pnsolve.kernels._exp.exp_floor` (``exp`` of smaller arguments, subnormal results,
is 20–50× slower), one ``exp`` and the read in ``addmm_``; ``exp`` dominates.
"""

from __future__ import annotations

from typing import Any

import torch

from ..._core.row_halves import functorch_wrapped, in_row_parts, may_split
from ..kernel import Kernel, rows_of

__all__ = [
    "DEFAULT_MAX_MEMORY",
    "DEFAULT_TILE",
    "DEFAULT_TILE_CUDA",
    "dense_block",
    "tile_shape",
    "tiled_matmat",
]

#: Default cap on the tile workspace in bytes (256 MiB; actual use is far smaller by default).
DEFAULT_MAX_MEMORY = 256 * 2**20
#: Default tile ``(rows, cols)`` on a CPU: 512 × 512 entries, 1 MiB in float32 and 2 MiB
#: in float64, the L2 cache of the 2-core reference machine (1 MiB per core). Single
#: threaded, an RBF matvec (n = 4096) reached 0.69 of the ``exp`` bound in float32
#: against 0.58 with 512 × 1024 (2 MiB: the distance GEMM's writes leave L2 and cost
#: twice as much), and 0.68 against 0.69 (noise) in float64 (benchmarks/bench_kernel_matrix.py).
DEFAULT_TILE = (512, 512)
#: Default tile on a CUDA device: each tile costs a handful of kernel launches (GEMM,
#: ``exp``, ``addmm``), so the CPU's cache-sized tiles leave a GPU launch-bound (an H200
#: ran 512 × 1024 tiles at 0.02 of its ``exp`` bound, benchmarks/bench_gpu.py); 4096 × 8192
#: float32 entries are 128 MiB, inside :data:`DEFAULT_MAX_MEMORY`.
DEFAULT_TILE_CUDA = (4096, 8192)


def tile_shape(
    n1: int,
    n2: int,
    itemsize: int,
    *,
    tile: tuple[int, int] | None = None,
    max_memory: int = DEFAULT_MAX_MEMORY,
    num_buffers: int = 1,
    device: torch.device | None = None,
) -> tuple[int, int]:
    """Tile ``(rows, cols)`` whose ``num_buffers`` buffers fit in ``max_memory`` bytes.

    Starts from ``tile`` (default :data:`DEFAULT_TILE`, or :data:`DEFAULT_TILE_CUDA` when
    ``device`` is a CUDA device) clipped to ``(n1, n2)`` and halves the larger side until
    ``num_buffers · rows · cols · itemsize ≤ max_memory`` (never below ``1 × 1``).
    """
    if tile is None:
        cuda = device is not None and torch.device(device).type == "cuda"
        tile = DEFAULT_TILE_CUDA if cuda else DEFAULT_TILE
    tr, tc = tile
    tr, tc = max(1, min(tr, n1)), max(1, min(tc, n2))
    while num_buffers * tr * tc * itemsize > max_memory and tr * tc > 1:
        if tc >= tr:
            tc = max(1, tc // 2)
        else:
            tr = max(1, tr // 2)
    return tr, tc


def _operands(kernel: Kernel, X1: torch.Tensor, X2: torch.Tensor | None) -> tuple[Any, Any]:
    """Left operands of ``X1`` and right operands of ``X2`` (``X1`` if ``None``)."""
    left = kernel.tile_operands(X1, left=True)
    return left, kernel.tile_operands(X1 if X2 is None else X2, left=False)


def _self_diagonal(offset: int | None, r0: int, r1: int, c0: int, c1: int) -> int | None:
    """Offset of the self pairs' diagonal inside tile ``[r0, r1) × [c0, c1)``, if it meets it."""
    if offset is not None and r0 + offset < c1 and c0 < r1 + offset:
        return r0 + offset - c0
    return None


@torch.no_grad()
def tiled_matmat(
    kernel: Kernel,
    X1: torch.Tensor,
    X2: torch.Tensor | None,
    V: torch.Tensor,
    tile: tuple[int, int],
    *,
    stats: dict[str, int] | None = None,
    self_offset: int | None = None,
    parts: int | None = None,
) -> torch.Tensor:
    """``K(X1, X2) @ V`` by tiles, without autograd.

    Parameters
    ----------
    kernel
        A matrix-free kernel (:attr:`~pnsolve.kernels.Kernel.matrix_free`).
    X1
        Shape ``(n1, d)``.
    X2
        Shape ``(n2, d)``, or ``None`` for ``X2 = X1`` (self distances set to exact zeros).
    V
        Shape ``(n2, k)``.
    tile
        ``(rows, cols)`` of the reused buffer(s).
    stats
        Optional dict; receives ``"buffer_elements"`` (largest buffer allocated),
        ``"tiles"`` (tiles computed) and ``"parts"`` (row parts of the last product),
        for tests and benchmarks.
    self_offset
        With ``X2`` given: row ``i`` of ``X1`` is the same point as row ``i + self_offset``
        of ``X2`` (a row block of a symmetric matrix; negative for a column block), and
        those distances are set to exact zeros. ``X2 = None`` means offset 0.
    parts
        On the CPU, the rows of tiles are split into this many parts, one thread each,
        every part running its operations one-threaded
        (:func:`~pnsolve._core.row_halves.in_row_parts`; each part holds its own tile
        buffers). Default: torch's intra-op thread count. The result does not depend on
        it: every row sums its tiles in the same order. One part (no split) off the CPU,
        under functorch transforms, with one thread, or where a term of the kernel has
        :attr:`~pnsolve.kernels.Kernel.parallel_tiles` ``False``.

    Returns
    -------
    torch.Tensor
        Shape ``(n1, k)``.
    """
    offset = 0 if X2 is None else self_offset
    A, B = _operands(kernel, X1, X2)
    n1, n2 = X1.shape[0], (X1 if X2 is None else X2).shape[0]
    tr, tc = tile
    out = torch.zeros(n1, V.shape[1], dtype=V.dtype, device=V.device)
    size = min(tr, n1) * min(tc, n2)

    def rows(span: slice) -> int:
        return _row_tiles(kernel, A, B, V, out, span, (tr, tc), (size, X1.dtype), offset)

    parts = _parts(kernel, A, B, V, torch.get_num_threads() if parts is None else parts)
    if parts > 1 and n1 > tr:
        counts = in_row_parts(rows, n1, parts, align=tr)
    else:
        counts = [rows(slice(0, n1))]
    if stats is not None:
        stats["buffer_elements"] = max(stats.get("buffer_elements", 0), size)
        stats["tiles"] = stats.get("tiles", 0) + sum(counts)
        stats["parts"] = len(counts)
    return out.mul_(kernel.tile_scale(X1))


def _parts(kernel: Kernel, A: Any, B: Any, V: torch.Tensor, parts: int) -> int:
    """``parts``, or 1 where the tiles may not leave the calling thread."""
    if parts < 2:
        return 1
    tensors = [*_leaves(A), *_leaves(B), V.detach()]
    if not may_split(*tensors) or any(functorch_wrapped(p) for p in kernel.parameters()):
        return 1
    if not all(getattr(m, "parallel_tiles", True) for m in kernel.modules()):
        return 1  # a term whose tiles must stay on one thread (Kernel.parallel_tiles)
    return parts


def _leaves(ops: Any) -> list[torch.Tensor]:
    """The tensors in nested tile operands."""
    if isinstance(ops, tuple):
        return [t for o in ops for t in _leaves(o)]
    return [ops] if isinstance(ops, torch.Tensor) else []


def _row_tiles(
    kernel: Kernel,
    A: Any,
    B: Any,
    V: torch.Tensor,
    out: torch.Tensor,
    span: slice,
    tile: tuple[int, int],
    buffer: tuple[int, torch.dtype],
    offset: int | None,
) -> int:
    """Accumulate the tiles of rows ``span`` into ``out[span]``; the number of tiles.

    Runs under ``no_grad`` in whichever thread calls it (grad mode is per thread), with
    its own buffers (``buffer``: their size and dtype), so parts of one product can run
    side by side.
    """
    (tr, tc), n2, (size, dtype) = tile, V.shape[0], buffer
    count = 0
    with torch.no_grad():
        buf = torch.empty(size, dtype=dtype, device=out.device)
        works = [torch.empty_like(buf) for _ in range(kernel.tile_buffers)]
        for r0 in range(span.start, span.stop, tr):
            r1 = min(span.stop, r0 + tr)
            a = rows_of(A, r0, r1)
            acc = out[r0:r1]
            for c0 in range(0, n2, tc):
                c1 = min(n2, c0 + tc)
                m = (r1 - r0) * (c1 - c0)
                s = buf[:m].view(r1 - r0, c1 - c0)
                work = [w[:m].view(r1 - r0, c1 - c0) for w in works]
                diag = _self_diagonal(offset, r0, r1, c0, c1)
                kernel.fill_tile_(s, a, rows_of(B, c0, c1), diag, work)
                acc.addmm_(s, V[c0:c1])
                count += 1
    return count


#: Rows per in-place pass of :func:`dense_block` (keeps the scratch buffer small).
DENSE_ROW_CHUNK = 256


@torch.no_grad()
def dense_block(
    kernel: Kernel,
    X1: torch.Tensor,
    X2: torch.Tensor | None,
    *,
    self_offset: int | None = None,
) -> torch.Tensor:
    """Dense ``K(X1, X2)`` without autograd: one output buffer, evaluated in place.

    Row blocks of the output are filled in place by the kernel's ``fill_tile_`` while
    they are still in cache; no ``(n1, n2)`` temporaries besides the result (and the
    kernel's scratch rows). For ``X2 = None`` only the
    upper triangle is evaluated and mirrored, so ``K(X, X)`` is exactly symmetric with
    its diagonal exactly ``outputscale``.

    Parameters
    ----------
    kernel
        A matrix-free kernel.
    X1
        Shape ``(n1, d)``.
    X2
        Shape ``(n2, d)``, or ``None`` for ``X2 = X1``.
    self_offset
        With ``X2`` given: row ``i`` of ``X1`` is row ``i + self_offset`` of ``X2``; those
        distances are exact zeros (as in :func:`tiled_matmat`).

    Returns
    -------
    torch.Tensor
        ``K(X1, X2)``, shape ``(n1, n2)``.
    """
    sym = X2 is None
    A, B = _operands(kernel, X1, X2)
    n1, n2 = X1.shape[0], (X1 if X2 is None else X2).shape[0]
    out = torch.empty(n1, n2, dtype=X1.dtype, device=X1.device)
    rows = max(1, min(n1, DENSE_ROW_CHUNK))
    works = [
        torch.empty(rows * n2, dtype=X1.dtype, device=X1.device) for _ in range(kernel.tile_buffers)
    ]
    for r0 in range(0, n1, rows):
        r1 = min(n1, r0 + rows)
        c0 = r0 if sym else 0  # symmetric: columns left of the block are mirrored below
        s = out[r0:r1, c0:]
        shape = (r1 - r0, n2 - c0)
        work = [w[: shape[0] * shape[1]].view(shape) for w in works]
        diag = 0 if sym else _self_diagonal(self_offset, r0, r1, 0, n2)
        kernel.fill_tile_(s, rows_of(A, r0, r1), rows_of(B, c0, n2), diag, work)
        if sym:
            blk = out[r0:r1, r0:r1]
            lower = torch.ones(blk.shape, dtype=torch.bool, device=blk.device).tril(-1)
            blk.copy_(torch.where(lower, blk.mT, blk))  # mirror the upper triangle
            out[r0:r1, :r0].copy_(out[:r0, r0:r1].mT)
    return out.mul_(kernel.tile_scale(X1))
