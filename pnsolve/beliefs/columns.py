"""Append-only column storage for the growing factors of a belief."""

from __future__ import annotations

import torch

__all__ = ["ColumnBuffer"]


class ColumnBuffer:
    """Append-only ``(n, capacity)`` storage whose prefixes are handed out as views.

    A solver appends a few columns per iteration; beliefs hold ``view()`` of the first
    ``i`` columns. Appending writes only beyond ``i`` (or into new storage when the
    capacity doubles), so views held by earlier, frozen solver states never change.
    Amortised cost per appended column: ``O(n)``.

    Parameters
    ----------
    n
        Number of rows.
    dtype, device
        Of the storage.
    capacity
        Initial number of columns.
    """

    def __init__(
        self, n: int, dtype: torch.dtype, device: torch.device, capacity: int = 16
    ) -> None:
        self._data = torch.empty(n, max(1, capacity), dtype=dtype, device=device)
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
        if self._size + m > self._data.shape[1]:
            grown = torch.empty(
                self._data.shape[0],
                max(2 * self._data.shape[1], self._size + m),
                dtype=self._data.dtype,
                device=self._data.device,
            )
            grown[:, : self._size] = self._data[:, : self._size]
            self._data = grown
        self._data[:, self._size : self._size + m] = columns
        self._size += m

    def view(self) -> torch.Tensor:
        """The stored columns, shape ``(n, len(self))`` (a view, never copied)."""
        return self._data[:, : self._size]
