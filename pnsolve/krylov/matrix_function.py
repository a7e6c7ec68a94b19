"""Products with matrix functions ``f(A) z`` by the Lanczos process."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._core.precision import full_float32
from ..linops.base import LinearOperator
from .lanczos_process import lanczos

__all__ = ["matrix_function"]


@full_float32
def matrix_function(
    A: LinearOperator,
    Z: torch.Tensor,
    fn: Callable[[torch.Tensor], torch.Tensor],
    *,
    maxiter: int | None = None,
) -> torch.Tensor:
    """``f(A) Z`` for symmetric ``A`` via Lanczos with full reorthogonalisation.

    Each column ``z`` gives ``‖z‖ Q f(T) e₁`` from a Lanczos run started at ``z``. Run
    to an invariant subspace (the default ``maxiter = n``) the result is exact up to
    rounding; this costs up to ``n`` products per column and is meant for study,
    sampling and tests at small ``n``.

    Parameters
    ----------
    A
        Symmetric operator, shape ``(n, n)``.
    Z
        Vectors, shape ``(n, k)``.
    fn
        Elementwise function of the eigenvalues, e.g. ``torch.sqrt`` or ``lambda t: t ** -0.5``.
    maxiter
        Lanczos steps per column (default ``n``).

    Returns
    -------
    torch.Tensor
        ``f(A) Z``, shape ``(n, k)``.
    """
    n = A.shape[0]
    steps = n if maxiter is None else int(maxiter)
    out = torch.zeros_like(Z)
    for j in range(Z.shape[1]):
        z = Z[:, j]
        norm = torch.linalg.vector_norm(z)
        if float(norm) == 0.0:
            continue
        Q, T = lanczos(A, z, steps)[:2]
        evals, evecs = torch.linalg.eigh(T)
        coef = evecs @ (fn(evals) * evecs[0])
        out[:, j] = norm * (Q @ coef)
    return out
