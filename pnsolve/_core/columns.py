"""Append-only column storage for the growing factors of a belief."""

from __future__ import annotations

import torch

__all__ = ["ColumnBuffer"]


class ColumnBuffer:
    """Append-only storage of ``n``-vectors whose prefixes are handed out as ``(n, i)`` views.

    A solver appends a few columns per iteration; beliefs hold ``view()`` of the first
    ``i`` columns. Appending writes only beyond ``i`` (or into new storage when the
    capacity doubles), so views held by earlier, frozen solver states never change.

    The columns are stored as contiguous rows of a ``(capacity, n)`` tensor: appending
    is a contiguous copy, and products ``Vᵀ z`` / ``V c`` with the ``(n, i)`` view are
    row-major matrix-vector products. Amortised cost per appended column: ``O(n)``.

    Parameters
    ----------
    n
        Length of the columns.
    dtype, device
        Of the storage.
    capacity
        Initial number of columns.
    """

    def __init__(
        self, n: int, dtype: torch.dtype, device: torch.device, capacity: int = 16
    ) -> None:
        self._data = torch.empty(max(1, capacity), n, dtype=dtype, device=device)
        self._size = 0

    @classmethod
    def from_tensor(cls, columns: torch.Tensor) -> ColumnBuffer:
        """A buffer holding a copy of ``columns`` (shape ``(n, m)``)."""
        buf = cls(columns.shape[0], columns.dtype, columns.device, capacity=columns.shape[1] + 16)
        buf.append(columns)
        return buf

    def __len__(self) -> int:
        return self._size

    def append(self, columns: torch.Tensor) -> None:
        """Append ``columns`` of shape ``(n, m)``."""
        m = columns.shape[1]
        if self._size + m > self._data.shape[0]:
            grown = torch.empty(
                max(2 * self._data.shape[0], self._size + m),
                self._data.shape[1],
                dtype=self._data.dtype,
                device=self._data.device,
            )
            grown[: self._size] = self._data[: self._size]
            self._data = grown
        for j in range(m):  # row copies: contiguous, several times faster than a strided block
            self._data[self._size + j].copy_(columns[:, j])
        self._size += m

    def view(self) -> torch.Tensor:
        """The stored columns, shape ``(n, len(self))`` (a view, never copied)."""
        return self._data[: self._size].mT
