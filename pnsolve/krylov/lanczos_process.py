"""The symmetric Lanczos process ``A Q ≈ Q T``."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .._core.precision import full_float32
from .._core.validation import check_positive_int
from ..linops.checks import as_operand, as_square_operator
from .reorthogonalize import reorthogonalize

__all__ = ["LanczosResult", "lanczos"]

_REORTH = ("full", "none")


class LanczosResult(NamedTuple):
    """Output of :func:`lanczos`; unpacks as ``Q, T, ...``.

    Attributes
    ----------
    Q
        Lanczos basis, shape ``(n, k')`` with ``k' ≤ k``; ``Q[:, 0] = v/‖v‖``.
    T
        Symmetric tridiagonal ``Qᵀ A Q``, dense, shape ``(k', k')``.
    alpha
        Diagonal of ``T``, shape ``(k',)``.
    beta
        Off-diagonal of ``T``, shape ``(k' − 1,)``.
    beta_next
        0-d tensor: norm of the next (unnormalised) Lanczos vector, so that
        ``A Q = Q T + beta_next · q_{k'+1} e_{k'}ᵀ``. Ritz pair ``(θ, Q s)`` has residual
        ``beta_next·|s_{k'}|``.
    breakdown
        Whether an invariant subspace was found (``beta_next`` fell below the
        tolerance); if so ``k'`` may be smaller than ``k``. Not an error.
    """

    Q: torch.Tensor
    T: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor
    beta_next: torch.Tensor
    breakdown: bool


@full_float32
def lanczos(A: object, v: object, k: int, *, reorth: str = "full") -> LanczosResult:
    """Run ``k`` steps of the Lanczos process on symmetric ``A`` from ``v``.

    One product with ``A`` per step (``k'`` products in total).

    Parameters
    ----------
    A
        Symmetric operator of shape ``(n, n)``, anything
        :func:`pnsolve.linops.as_linop` accepts. Stored matrices are checked for
        symmetry (``ValueError``); matrix-free operators are taken to be symmetric.
    v
        Starting vector, shape ``(n,)``, nonzero and finite, with ``A``'s dtype and device.
    k
        Number of steps, ``k ≥ 1``; ``k > n`` is clipped to ``n`` (a Krylov space
        has at most ``n`` dimensions).
    reorth
        ``"full"`` (default): two-pass classical Gram–Schmidt of every new vector
        against all previous ones, so ``Q`` stays orthonormal to working precision.
        ``"none"``: the plain three-term recurrence (cheaper, loses orthogonality as
        Ritz values converge, producing spurious copies of eigenvalues).

    Returns
    -------
    LanczosResult
        ``(Q, T, alpha, beta, beta_next, breakdown)``.

    Notes
    -----
    The process stops early (``k' < k``, ``breakdown=True``) when
    ``β_j ≤ 10·√n·eps·‖T_j‖`` where ``‖T_j‖`` is estimated by the largest
    ``|α_i| + β_{i-1} + β_i`` so far: the Krylov space is then invariant to working
    precision, and the eigenvalues of ``T`` are eigenvalues of ``A``.
    """
    A = as_square_operator(A, "A")
    v = as_operand(v, A, "v", allow_matrix=False)
    check_positive_int(k, "k", type_name=True)
    if reorth not in _REORTH:
        raise ValueError(f"reorth must be one of {_REORTH}, got {reorth!r}")
    n = A.shape[0]
    k = min(k, n)
    vnorm = torch.linalg.vector_norm(v)
    if not bool(vnorm > 0):
        raise ValueError("v must be nonzero")
    with torch.no_grad():
        return _lanczos(A, v / vnorm, k, reorth == "full")


def _lanczos(A, q: torch.Tensor, k: int, full: bool) -> LanczosResult:
    n = q.shape[0]
    rel_tol = 10.0 * math.sqrt(n) * torch.finfo(q.dtype).eps
    Qt = torch.empty(k, n, dtype=q.dtype, device=q.device)  # rows are the Lanczos vectors
    alpha = torch.empty(k, dtype=q.dtype, device=q.device)
    beta = torch.empty(k, dtype=q.dtype, device=q.device)  # beta[j] couples q_j and q_{j+1}
    anorm = 0.0
    breakdown = False
    steps = k
    for j in range(k):
        Qt[j] = q
        w = A.matmat(q.unsqueeze(-1)).squeeze(-1)
        alpha[j] = (q * w).sum()  # not torch.dot: MKL threads it and its OpenMP workers then spin
        w.sub_(q, alpha=float(alpha[j]))
        if j > 0:
            w.sub_(Qt[j - 1], alpha=float(beta[j - 1]))
        if full:
            w = reorthogonalize(w, Qt[: j + 1])
        beta[j] = torch.linalg.vector_norm(w)
        bj = float(beta[j])
        anorm = max(anorm, abs(float(alpha[j])) + bj + (float(beta[j - 1]) if j else 0.0))
        if bj <= rel_tol * anorm:
            breakdown, steps = True, j + 1
            break
        q = w / bj
    alpha, beta_next, beta = alpha[:steps], beta[steps - 1], beta[: steps - 1]
    T = torch.diag(alpha) + torch.diag(beta, 1) + torch.diag(beta, -1)
    return LanczosResult(Qt[:steps].mT.contiguous(), T, alpha, beta.clone(), beta_next, breakdown)
