"""The Jacobi (diagonal) preconditioner."""

from __future__ import annotations

import torch

from .._core.validation import check_finite
from ..linops.base import LinearOperator
from ._common import as_spd_operator

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
        d = check_finite(A.diagonal().detach(), "the diagonal of A")
        if not bool((d > 0).all()):
            i = int((d <= 0).nonzero()[0, 0])
            raise ValueError(
                f"A has a non-positive diagonal entry A[{i}, {i}] = {float(d[i]):.3e}; "
                "the Jacobi preconditioner needs a positive diagonal"
            )
        super().__init__(A.shape, A.dtype, A.device, is_symmetric=True, is_psd=True)
        self.diag = d
        self._inv = 1.0 / d

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._inv.unsqueeze(-1) * X

    def _diagonal(self) -> torch.Tensor:
        return self._inv

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(rows.numel(), self.shape[1], dtype=self.dtype, device=self.device)
        out[torch.arange(rows.numel(), device=self.device), rows] = self._inv[rows]
        return out

    def logdet(self) -> torch.Tensor:
        """``log det P = Σ log A_ii`` (0-d tensor)."""
        return torch.log(self.diag).sum()
