"""Segment sums over action blocks that give the same bits on every run, on every device.

``index_add`` sums into its targets in whatever order the hardware gives: on the CPU a
fixed order, on a CUDA device atomic additions whose order changes from run to run, so
a training run and its resumption from a checkpoint drift apart in the last bits (seen
on an H200, 2026-11-28). On CUDA devices the sums are therefore matrix products with the
one-hot ``(n, i)`` block matrix (``O(n i)`` memory, as ``K S`` itself; cuBLAS sums in a
fixed order), and on the CPU ``index_add``.
"""

from __future__ import annotations

import torch

__all__ = ["block_one_hot", "by_matmul", "segment_sum"]


def by_matmul(device: torch.device) -> bool:
    """Whether segment sums on ``device`` go through the one-hot matrix (not CPU)."""
    return device.type != "cpu"


def block_one_hot(block_of: torch.Tensor, i: int, dtype: torch.dtype) -> torch.Tensor:
    """``P[c, j] = 1`` if point ``c`` is in block ``j``; shape ``(n, i)``."""
    return torch.nn.functional.one_hot(block_of, i).to(dtype)


def segment_sum(
    src: torch.Tensor, block_of: torch.Tensor, i: int, dim: int, *, matmul: bool | None = None
) -> torch.Tensor:
    """Sum the slices of ``src`` along ``dim`` (0 or 1) into the ``i`` blocks of ``block_of``.

    Parameters
    ----------
    src
        Shape ``(n,)``, ``(n, k)`` (``dim=0``) or ``(t, n)`` (``dim=1``).
    block_of
        Block of each of the ``n`` slices, integers in ``[0, i)``, shape ``(n,)``.
    i
        Number of blocks.
    dim
        The dimension of length ``n``.
    matmul
        Sum through the one-hot matrix (default: on every device but the CPU).

    Returns
    -------
    torch.Tensor
        ``src`` with dimension ``dim`` of length ``i`` (differentiable in ``src``).
    """
    if matmul is None:
        matmul = by_matmul(src.device)
    if not matmul:
        shape = list(src.shape)
        shape[dim] = i
        return src.new_zeros(shape).index_add(dim, block_of, src)
    P = block_one_hot(block_of, i, src.dtype)
    if src.ndim == 1:
        return src @ P
    return P.mT @ src if dim == 0 else src @ P
