"""Symmetric (multilevel) Toeplitz operators with FFT products."""

from __future__ import annotations

import torch

from .._core.validation import check_finite, check_tensor
from .base import LinearOperator

__all__ = ["Toeplitz"]


class Toeplitz(LinearOperator):
    """Symmetric ``d``-level Toeplitz operator ``T[i, j] = c[|i₁ − j₁|, …, |i_d − j_d|]``.

    With a 1-D ``column`` (``d = 1``) this is the symmetric Toeplitz matrix whose first
    column is ``c``. With ``column`` of shape ``(m₁, …, m_d)`` it is the ``d``-level
    (block Toeplitz with Toeplitz blocks) matrix of size ``m = m₁ ⋯ m_d`` over a regular
    ``d``-dimensional grid, multi-indices flattened in row-major (C) order: the kernel
    matrix ``k(u_i − u_j)`` of a stationary kernel that depends on ``|Δ|`` per
    dimension, on a regular grid ``u``.

    Products embed ``T`` in a ``d``-level circulant of shape ``(2m₁, …, 2m_d)`` and cost
    ``O(2ᵈ m log m)`` per column through ``torch.fft`` (real FFTs); no ``m × m`` object
    is formed. Autograd reaches ``column``.

    Parameters
    ----------
    column
        Floating tensor of shape ``(m₁, …, m_d)``, ``d ≥ 1``, finite: ``c[k]`` is the
        entry at index offset ``|Δ| = k``.
    is_psd
        Declare the operator positive semi-definite (e.g. a kernel matrix on a grid);
        structural knowledge, not checked.

    Raises
    ------
    TypeError
        If ``column`` is not a floating tensor.
    ValueError
        If ``column`` is 0-d, empty or has NaN/Inf entries.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> T = pn.linops.Toeplitz(torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64))
    >>> T.to_dense()
    tensor([[2.0000, 1.0000, 0.5000],
            [1.0000, 2.0000, 1.0000],
            [0.5000, 1.0000, 2.0000]], dtype=torch.float64)
    """

    def __init__(self, column: torch.Tensor, *, is_psd: bool = False) -> None:
        column = check_tensor(column, "column")
        if not column.is_floating_point() or column.is_complex():
            raise TypeError(f"column must be a real floating tensor, got {column.dtype}")
        if column.ndim == 0 or column.numel() == 0:
            raise ValueError(
                f"column must have shape (m₁, …, m_d) with d ≥ 1 and every m > 0, got "
                f"{tuple(column.shape)}"
            )
        check_finite(column, "column")
        m = column.numel()
        super().__init__(
            (m, m), column.dtype, column.device, is_symmetric=True, is_psd=bool(is_psd)
        )
        self.column = column
        #: Grid shape ``(m₁, …, m_d)`` of the levels.
        self.levels: tuple[int, ...] = tuple(int(s) for s in column.shape)
        self._fft_shape = tuple(2 * s for s in self.levels)
        # the embedding [c_0 … c_{m−1}, 0, c_{m−1} … c_1] is even along every axis, so its
        # DFT is real: keep the real part (half the work in every product)
        self._spectrum = torch.fft.rfftn(_embed(column)).real.unsqueeze(-1)

    def __repr__(self) -> str:
        return f"Toeplitz(levels={self.levels}, dtype={self.dtype})"

    def _to(self, dtype: torch.dtype) -> Toeplitz:
        return Toeplitz(self.column.to(dtype), is_psd=self.is_psd)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        d = len(self.levels)
        Z = X.reshape(*self.levels, X.shape[1])  # (m₁, …, m_d, k): FFTs over the grid axes
        F = torch.fft.rfftn(Z, s=self._fft_shape, dim=tuple(range(d)))
        Y = torch.fft.irfftn(F * self._spectrum, s=self._fft_shape, dim=tuple(range(d)))
        return Y[tuple(slice(0, s) for s in self.levels)].reshape(X.shape).contiguous()

    def _diagonal(self) -> torch.Tensor:
        return self.column.reshape(-1)[0].expand(self.shape[0]).clone()

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        i = torch.unravel_index(rows, self.levels)  # d tensors of shape (r,)
        j = torch.unravel_index(torch.arange(self.shape[1], device=self.device), self.levels)
        return self.column[
            tuple((a.unsqueeze(1) - b.unsqueeze(0)).abs() for a, b in zip(i, j, strict=True))
        ]


def _embed(column: torch.Tensor) -> torch.Tensor:
    """The even circulant embedding of shape ``(2m₁, …, 2m_d)`` of a symmetric ``column``."""
    E = column
    for axis in range(column.ndim):
        m = column.shape[axis]
        zero_shape = list(E.shape)
        zero_shape[axis] = 1
        zero = torch.zeros(zero_shape, dtype=E.dtype, device=E.device)
        tail = E.narrow(axis, 1, m - 1).flip(axis)
        E = torch.cat([E, zero, tail], dim=axis)
    return E
