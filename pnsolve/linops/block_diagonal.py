"""Block-diagonal operators."""

from __future__ import annotations

import torch

from ._compat import check_compatible
from .base import LinearOperator

__all__ = ["BlockDiagonal"]


class BlockDiagonal(LinearOperator):
    """``blkdiag(A_1, …, A_p)`` with square or rectangular blocks.

    Parameters
    ----------
    *blocks
        Operators sharing dtype and device. Symmetric (PSD) if every block is.
    """

    def __init__(self, *blocks: LinearOperator) -> None:
        if not blocks:
            raise ValueError("BlockDiagonal needs at least one block")
        if not isinstance(blocks[0], LinearOperator):
            raise TypeError("BlockDiagonal: block 0 is not a LinearOperator")
        check_compatible(blocks, "BlockDiagonal", same_shape=False)
        m = sum(b.shape[0] for b in blocks)
        n = sum(b.shape[1] for b in blocks)
        super().__init__(
            (m, n),
            blocks[0].dtype,
            blocks[0].device,
            is_symmetric=all(b.is_symmetric for b in blocks),
            is_psd=all(b.is_psd for b in blocks),
        )
        self.blocks = tuple(blocks)
        self._row_offsets = _offsets([b.shape[0] for b in blocks])
        self._col_offsets = _offsets([b.shape[1] for b in blocks])

    def _to(self, dtype: torch.dtype) -> BlockDiagonal:
        return BlockDiagonal(*(b.to(dtype) for b in self.blocks))

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        c = self._col_offsets  # row slices (views), as torch.split, on every backend
        parts = [X[c[j] : c[j + 1]] for j in range(len(self.blocks))]
        return torch.cat([b._matmat(p) for b, p in zip(self.blocks, parts)], dim=0)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        r = self._row_offsets
        parts = [X[r[j] : r[j + 1]] for j in range(len(self.blocks))]
        return torch.cat([b._rmatmat(p) for b, p in zip(self.blocks, parts)], dim=0)

    def _diagonal(self) -> torch.Tensor:
        if not all(b.is_square for b in self.blocks):
            return super()._diagonal()
        return torch.cat([b._diagonal() for b in self.blocks])

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(rows.numel(), self.shape[1], dtype=self.dtype, device=self.device)
        for j, b in enumerate(self.blocks):
            r0, r1 = self._row_offsets[j], self._row_offsets[j + 1]
            c0, c1 = self._col_offsets[j], self._col_offsets[j + 1]
            mask = (rows >= r0) & (rows < r1)
            if bool(mask.any()):
                out[mask, c0:c1] = b._row_block(rows[mask] - r0)
        return out


def _offsets(sizes: list[int]) -> list[int]:
    out = [0]
    for s in sizes:
        out.append(out[-1] + s)
    return out
