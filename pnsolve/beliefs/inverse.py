"""The inverse of an SPD operator, applied by solving to working precision."""

from __future__ import annotations

import torch

from ..linops.base import LinearOperator

__all__ = ["Inverse"]


class Inverse(LinearOperator):
    """``A⁻¹`` for a symmetric positive definite operator ``A``, applied by CG.

    Every product runs :func:`pnsolve.cg` to a relative residual of ``rtol`` (default:
    a few hundred machine epsilons), so it costs up to ``n`` products with ``A``. Meant
    for study, teaching and tests at small ``n`` (e.g. the exact covariance of a
    solution belief under the inverse prior); it is never used by the cheap paths.

    Parameters
    ----------
    A
        SPD operator of shape ``(n, n)``.
    rtol
        Relative residual tolerance of each inner solve.
    """

    def __init__(self, A: LinearOperator, rtol: float | None = None) -> None:
        if not isinstance(A, LinearOperator):
            raise TypeError(f"A must be a LinearOperator, got {type(A).__name__}")
        super().__init__(A.shape, A.dtype, A.device, is_symmetric=True, is_psd=True)
        self.A = A
        self.rtol = 100 * torch.finfo(A.dtype).eps if rtol is None else float(rtol)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        from ..krylov import cg

        Y, _ = cg(self.A, X, rtol=self.rtol, maxiter=10 * self.shape[0])
        return Y
