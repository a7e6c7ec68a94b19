"""Block-sparse actions: ``S`` of shape ``(n, i)`` whose column ``j`` lives on block ``j``.

Every training point belongs to exactly one block (nothing is dropped; blocks differ in
size by at most one for ``blocks="random"``, and follow clusters for ``"kmeans"``), and
column ``j`` of ``S`` holds learned entries on block ``j`` and zeros elsewhere. So
``S`` is stored as its ``n`` non-zero entries (``values``, in the order of the training
points) and the block of each point (``block_of``); ``SᵀS`` is diagonal,
``(SᵀS)_jj = ‖s_j‖²``. Products with ``S`` are segment sums over the blocks,
``O(n k)`` for ``k`` columns, and never form the dense ``(n, i)`` matrix unless asked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._core import random as rnd
from .segments import segment_sum

__all__ = ["BLOCKS", "BlockActions", "kmeans_blocks", "random_blocks"]

#: How the training points are split into blocks.
BLOCKS = ("random", "kmeans")

#: Lloyd iterations of ``blocks="kmeans"``.
KMEANS_ITERATIONS = 10


def random_blocks(n: int, i: int, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """Block of each of ``n`` points: a random permutation cut into ``i`` near-equal blocks.

    Returns an integer tensor ``(n,)`` with values in ``[0, i)``; block sizes are
    ``⌊n/i⌋`` or ``⌈n/i⌉``.
    """
    perm = rnd.randperm(n, generator=generator, device=device)
    block_of = torch.empty(n, dtype=torch.long, device=device)
    block_of[perm] = torch.arange(n, device=device) * i // n
    return block_of


def kmeans_blocks(X: torch.Tensor, i: int, generator: torch.Generator) -> torch.Tensor:
    """Block of each row of ``X`` ``(n, d)``: its cluster after a few Lloyd iterations.

    Centres start at ``i`` distinct random points; each iteration assigns every point to
    its nearest centre (in row blocks: ``O(n i d)``, memory ``O(rows · i)``) and moves
    the centres to their clusters' means. A cluster left empty is re-seeded at the
    point farthest from its centre, so every block has at least one point. Cost
    ``O(KMEANS_ITERATIONS · n i d)``, small next to one pass over the ``n²`` kernel entries.
    """
    n = X.shape[0]
    with torch.no_grad():
        centres = X[rnd.randperm(n, generator=generator, device=X.device)[:i]].clone()
        block_of = _assign(X, centres)
        for _ in range(KMEANS_ITERATIONS):
            sums = segment_sum(X, block_of, i, 0)
            counts = torch.bincount(block_of, minlength=i)
            centres = sums / counts.clamp_min(1).unsqueeze(1).to(X.dtype)
            block_of = _assign(X, centres)
        block_of = _fill_empty(X, centres, block_of, i)
    return block_of


def _assign(X: torch.Tensor, centres: torch.Tensor, rows: int = 4096) -> torch.Tensor:
    parts = [torch.cdist(X[r : r + rows], centres).argmin(1) for r in range(0, X.shape[0], rows)]
    return torch.cat(parts)


def _fill_empty(
    X: torch.Tensor, centres: torch.Tensor, block_of: torch.Tensor, i: int
) -> torch.Tensor:
    """Give every empty block the point farthest from its own centre (one per pass)."""
    block_of = block_of.clone()
    for j in range(i):
        counts = torch.bincount(block_of, minlength=i)
        if counts[j] > 0:
            continue
        dist = (X - centres[block_of]).square().sum(1)
        dist[counts[block_of] <= 1] = -1.0  # never empty another block
        block_of[int(dist.argmax())] = j
    return block_of


@dataclass(frozen=True)
class BlockActions:
    """The sparsity pattern of block-sparse actions over ``n`` points and ``i`` blocks.

    Attributes
    ----------
    block_of
        Block of each training point, integer tensor ``(n,)`` with values in ``[0, i)``;
        every block non-empty.
    num_actions
        ``i``.
    """

    block_of: torch.Tensor
    num_actions: int

    @property
    def sizes(self) -> torch.Tensor:
        """Points per block, shape ``(i,)``."""
        return torch.bincount(self.block_of, minlength=self.num_actions)

    def initial_values(self, dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
        """Random entries with unit-norm columns in expectation: ``N(0, 1/|block|)``, ``(n,)``."""
        n = self.block_of.shape[0]
        z = rnd.randn(n, generator=generator, dtype=dtype, device=self.block_of.device)
        return z / self.sizes[self.block_of].to(dtype).sqrt()

    def t_matmul(self, values: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
        """``Sᵀ M`` for ``M`` of shape ``(n, k)``: shape ``(i, k)`` (differentiable)."""
        return segment_sum(values.unsqueeze(1) * M, self.block_of, self.num_actions, 0)

    def rmatmul(self, M: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """``M S`` for ``M`` of shape ``(t, n)``: shape ``(t, i)`` (differentiable)."""
        return segment_sum(M * values, self.block_of, self.num_actions, 1)

    def dense(self, values: torch.Tensor) -> torch.Tensor:
        """``S`` as a dense ``(n, i)`` tensor (differentiable in ``values``)."""
        n = self.block_of.shape[0]
        S = values.new_zeros(n, self.num_actions)
        return S.index_put((torch.arange(n, device=values.device), self.block_of), values)

    def gram_diagonal(self, values: torch.Tensor) -> torch.Tensor:
        """``diag(SᵀS) = (‖s_j‖²)_j``, shape ``(i,)`` (``SᵀS`` is diagonal)."""
        return segment_sum(values * values, self.block_of, self.num_actions, 0)
