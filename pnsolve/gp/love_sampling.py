"""LOVE's fast predictive samples: a second Lanczos on the test covariance.

Pleiss, Gardner, Weinberger & Wilson (2018), §3.3.

For ``t`` test points the predictive covariance is ``C = k(Xs, Xs) − P Pᵀ`` with
``P = k(Xs, X) R`` from the LOVE cache. ``k`` Lanczos steps on ``C`` (each one
matrix-free product with ``k(Xs, Xs)`` plus two thin products with ``P``) give
``C ≈ Q T Qᵀ``; with ``T = U Λ Uᵀ`` the root ``S = Q U Λ^½`` (shape ``(t, k)``) turns
``k``-dimensional standard normals into joint samples ``mean + S z``, at ``O(t k)`` per
sample instead of the ``O(t³)`` Cholesky of ``C``.
"""

from __future__ import annotations

import torch

from .._core.errors import MissingStructureError, NotPositiveDefiniteError
from ..krylov.lanczos_process import lanczos
from ..linops.base import LinearOperator
from ..linops.closure import Closure

__all__ = ["lanczos_root", "predictive_covariance", "sampling_root"]


def predictive_covariance(prior: LinearOperator, P: torch.Tensor) -> LinearOperator:
    """The operator ``prior − P Pᵀ``, shape ``(t, t)``, never formed.

    Parameters
    ----------
    prior
        ``k(Xs, Xs)``, shape ``(t, t)`` (e.g. ``kernel.linop(Xs)``).
    P
        ``k(Xs, X) R``, shape ``(t, k)``.
    """
    t = prior.shape[0]
    if P.ndim != 2 or P.shape[0] != t:
        raise ValueError(f"P must have shape ({t}, k), got {tuple(P.shape)}")

    def matmat(V: torch.Tensor) -> torch.Tensor:
        return prior @ V - P @ (P.mT @ V)

    return Closure(matmat, (t, t), dtype=P.dtype, device=P.device, is_symmetric=True, is_psd=True)


def lanczos_root(
    C: LinearOperator, rank: int, start: torch.Tensor, scale: float = 0.0
) -> torch.Tensor:
    """A root ``S`` with ``S Sᵀ ≈ C`` from ``rank`` Lanczos steps on ``C``.

    Parameters
    ----------
    C
        Symmetric positive semi-definite operator, shape ``(t, t)``.
    rank
        Lanczos steps ``k ≥ 1`` (clipped to ``t``; fewer if the Krylov space is
        invariant, then ``S Sᵀ`` is exact on it).
    start
        Starting vector, shape ``(t,)``, nonzero.
    scale
        Size of the terms ``C`` is computed from, e.g. the largest prior variance for
        ``C = prior − P Pᵀ``: the cancellation leaves rounding errors of that size, so
        Ritz values down to ``−√t·eps·max(scale, λ_max)`` count as zero (default ``0``:
        relative to ``C``'s own largest Ritz value).

    Returns
    -------
    torch.Tensor
        ``S = Q U Λ^½``, shape ``(t, k')`` with ``k' ≤ k``. Eigenvalues of ``T`` that
        are negative at rounding level (``|λ| ≤ √t·eps·max(scale, λ_max)``) are set to zero.

    Raises
    ------
    NotPositiveDefiniteError
        If ``T = Qᵀ C Q`` has a clearly negative eigenvalue: ``C`` is not positive
        semi-definite (e.g. a kernel that does not match the cache).
    """
    res = lanczos(C, start, rank, reorth="full")
    lam, U = torch.linalg.eigh(res.T)
    eps = torch.finfo(lam.dtype).eps
    top = float(lam.abs().max()) if lam.numel() else 0.0
    floor = (C.shape[0] ** 0.5) * eps * max(top, float(scale))
    if float(lam.min()) < -floor:
        raise NotPositiveDefiniteError(
            f"the test covariance has a negative Ritz value {float(lam.min()):.3e} "
            f"(largest {top:.3e}): it is not positive semi-definite"
        )
    return (res.Q @ U) * lam.clamp_min(0.0).sqrt()


def sampling_root(
    prior: LinearOperator, P: torch.Tensor, var: torch.Tensor, rank: int
) -> torch.Tensor:
    """LOVE's sampling root of ``prior − P Pᵀ``: ``rank`` Lanczos steps from ``var``.

    Parameters
    ----------
    prior
        ``k(Xs, Xs)``, shape ``(t, t)`` (matrix-free, e.g. a kernel matrix).
    P
        ``k(Xs, X) R``, shape ``(t, k)``, from the cache's root ``R``.
    var
        The posterior variances ``(t,)``: the Lanczos start (all ones if none is
        positive).
    rank
        Lanczos steps (the cache's rank).

    Returns
    -------
    torch.Tensor
        ``S`` with ``S Sᵀ ≈ prior − P Pᵀ``, shape ``(t, k')`` (:func:`lanczos_root`).
    """
    with torch.no_grad():
        start = var if bool((var > 0).any()) else torch.ones_like(var)
        try:  # the prior's size bounds the rounding left by prior − P Pᵀ
            scale = float(prior.diagonal().abs().max()) if prior.shape[0] else 0.0
        except MissingStructureError:
            scale = 0.0
        return lanczos_root(predictive_covariance(prior, P), rank, start, scale)
