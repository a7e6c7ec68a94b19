"""Kronecker products of operators."""

from __future__ import annotations

import math

import torch

from .._core.errors import MissingStructureError
from .base import LinearOperator

__all__ = ["Kronecker"]


class Kronecker(LinearOperator):
    """``A₁ ⊗ A₂ ⊗ ⋯ ⊗ A_d`` applied factor by factor, never formed.

    For ``Aⱼ`` of shape ``(pⱼ, qⱼ)`` the operator has shape ``(p₁⋯p_d, q₁⋯q_d)`` and
    acts on vectors whose index is the row-major flattening of ``(i₁, …, i_d)``. A
    product reshapes ``X`` to ``(q₁, …, q_d, k)`` and applies each factor along its
    axis: ``Σⱼ (∏_{i≠j} sizes) · cost(Aⱼ)`` work (e.g. ``O(m log m)`` for Toeplitz
    factors), no ``m × m`` object.

    Parameters
    ----------
    *factors
        At least one :class:`LinearOperator`, all with the same dtype and device.

    Raises
    ------
    TypeError
        If a factor is not a ``LinearOperator`` or the dtypes differ.
    ValueError
        If no factor is given or the devices differ.

    Notes
    -----
    Symmetric when every factor is, positive semi-definite when every factor is (the
    eigenvalues of a Kronecker product are the products of the factors').
    """

    def __init__(self, *factors: LinearOperator) -> None:
        if not factors:
            raise ValueError("Kronecker needs at least one factor")
        for j, A in enumerate(factors):
            if not isinstance(A, LinearOperator):
                raise TypeError(f"factor {j} must be a LinearOperator, got {type(A).__name__}")
            if A.dtype != factors[0].dtype:
                raise TypeError(f"factor {j} has dtype {A.dtype}, factor 0 {factors[0].dtype}")
            if A.device != factors[0].device:
                raise ValueError(f"factor {j} is on {A.device}, factor 0 on {factors[0].device}")
        rows = math.prod(A.shape[0] for A in factors)
        cols = math.prod(A.shape[1] for A in factors)
        sym = all(A.is_symmetric for A in factors)
        super().__init__(
            (rows, cols),
            factors[0].dtype,
            factors[0].device,
            is_symmetric=sym,
            is_psd=sym and all(A.is_psd for A in factors),
        )
        self.factors = tuple(factors)

    def __repr__(self) -> str:
        inner = " ⊗ ".join(repr(A) for A in self.factors)
        return f"Kronecker({inner})"

    def _apply(self, X: torch.Tensor, transpose: bool) -> torch.Tensor:
        k = X.shape[1]
        in_sizes = [A.shape[0 if transpose else 1] for A in self.factors]
        Z = X.reshape(*in_sizes, k)
        for j, A in enumerate(self.factors):
            Z = Z.movedim(j, 0)
            rest = Z.shape[1:]
            flat = Z.reshape(Z.shape[0], -1)
            out = A._rmatmat(flat) if transpose else A._matmat(flat)
            Z = out.reshape(out.shape[0], *rest).movedim(0, j)
        return Z.reshape(-1, k)

    def _to(self, dtype: torch.dtype) -> Kronecker:
        return Kronecker(*(A.to(dtype) for A in self.factors))

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._apply(X, transpose=False)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._apply(X, transpose=True)

    def _diagonal(self) -> torch.Tensor:
        if not all(A.is_square for A in self.factors):
            raise MissingStructureError(
                "the diagonal of a Kronecker product is structured for square factors only"
            )
        d = self.factors[0].diagonal()
        for A in self.factors[1:]:
            d = (d.unsqueeze(-1) * A.diagonal().unsqueeze(0)).reshape(-1)
        return d

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        idx = torch.unravel_index(rows, tuple(A.shape[0] for A in self.factors))
        R = self.factors[0].row_block(idx[0])
        for A, i in zip(self.factors[1:], idx[1:], strict=True):
            R = (R.unsqueeze(-1) * A.row_block(i).unsqueeze(1)).reshape(rows.numel(), -1)
        return R
