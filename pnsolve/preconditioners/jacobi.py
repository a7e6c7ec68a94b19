"""The Jacobi (diagonal) preconditioner."""

from __future__ import annotations

import torch

from ..linops.base import LinearOperator
from ..linops.diagonal import Diagonal
from ._common import as_spd_operator, positive_diagonal

__all__ = ["Jacobi"]


class Jacobi(LinearOperator):
    """Jacobi preconditioner ``P = diag(A)``; products apply ``P⁻¹``.

    Pass it as ``M`` to :func:`pnsolve.cg` (SciPy convention: ``M ≈ A⁻¹``).

    Parameters
    ----------
    A
        Square operator with a structured diagonal (anything
        :func:`pnsolve.linops.as_linop` accepts), shape ``(n, n)``.

    Attributes
    ----------
    diag
        ``diag(A)``, shape ``(n,)``.

    Raises
    ------
    ValueError
        If the diagonal has non-positive or non-finite entries (``A`` cannot be SPD).
    MissingStructureError
        If ``A`` has no structured diagonal.
    """

    def __init__(self, A: object) -> None:
        A = as_spd_operator(A)
        d = positive_diagonal(A, "the Jacobi preconditioner needs a positive diagonal")
        super().__init__(A.shape, A.dtype, A.device, is_symmetric=True, is_psd=True)
        self.diag = d
        self._inverse = Diagonal(1.0 / d)  # P⁻¹

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._inverse._matmat(X)

    def _diagonal(self) -> torch.Tensor:
        return self._inverse._diagonal()

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        return self._inverse._row_block(rows)

    def logdet(self) -> torch.Tensor:
        """``log det P = Σ log A_ii`` (0-d tensor)."""
        return torch.log(self.diag).sum()
