"""The covariance of a solution belief: prior minus a low-rank downdate."""

from __future__ import annotations

import torch

from ..linops.base import LinearOperator

__all__ = ["DowndatedCovariance"]


class DowndatedCovariance(LinearOperator):
    """``Σ_i = Σ₀ − V Vᵀ``, symmetric positive semi-definite by construction.

    Parameters
    ----------
    prior_cov
        ``Σ₀``, shape ``(n, n)``.
    V
        Downdate root, shape ``(n, i)``.

    Notes
    -----
    Products cost one product with ``Σ₀`` plus ``O(n i)``; under the inverse prior
    ``Σ₀ = A⁻¹`` that is an inner solve (see :class:`~pnsolve.beliefs.Inverse`). The
    diagonal is available when ``Σ₀`` has a structured diagonal (e.g. ``σ² I``).
    """

    def __init__(self, prior_cov: LinearOperator, V: torch.Tensor) -> None:
        super().__init__(
            prior_cov.shape, prior_cov.dtype, prior_cov.device, is_symmetric=True, is_psd=True
        )
        self.prior_cov = prior_cov
        self.V = V

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.prior_cov @ X - self.V @ (self.V.mT @ X)

    def _diagonal(self) -> torch.Tensor:
        return self.prior_cov.diagonal() - (self.V * self.V).sum(-1)

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        return self.prior_cov.row_block(rows) - self.V[rows] @ self.V.mT
