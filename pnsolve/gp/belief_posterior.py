"""GP posteriors from a solver belief over representer weights (IterGP, IterNCGP)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..krylov.conjugate_gradient import cg
from ..linops.base import LinearOperator
from .posterior import GaussianPosterior

__all__ = ["belief_posterior", "exact_variance"]


def exact_variance(
    cross: LinearOperator, prior_var: torch.Tensor, A: LinearOperator
) -> torch.Tensor:
    """``k(x, x) − k(x, X) A⁻¹ k(X, x)`` by batched CG to rounding level; shape ``(t,)``.

    Forms the ``(N, t)`` cross-covariance: an analysis path, not the fast one.
    """
    with torch.no_grad():
        KXs = cross.to_dense().mT
        rtol = 100 * torch.finfo(KXs.dtype).eps
        W, _ = cg(A, KXs, rtol=rtol, maxiter=10 * A.shape[0])
        return prior_var - (KXs * W).sum(0)


def belief_posterior(
    *,
    cross: LinearOperator,
    prior_var: torch.Tensor,
    prior_cov: Callable[[], torch.Tensor],
    weights: torch.Tensor,
    V: torch.Tensor,
    offset: float,
    A: LinearOperator,
    num_latent: int = 1,
) -> GaussianPosterior:
    """Mean ``offset + k(Xs, X) v`` and covariance ``k(Xs, Xs) − k(Xs, X) V Vᵀ k(X, Xs)``.

    One matrix-free pass of the cross-covariance over ``[v, V]``; the split of the
    variance into mathematical and computational parts is computed on demand
    (:func:`exact_variance`).

    Parameters
    ----------
    cross
        ``k(Xs, X)``, shape ``(T, N)`` (``T = C t``, ``N = C n`` for ``C`` latent functions
        in class-major order).
    prior_var
        ``k(x, x)``, shape ``(T,)``.
    prior_cov
        Callable returning ``k(Xs, Xs)``, shape ``(T, T)``.
    weights
        Representer weights ``v``, shape ``(N,)``.
    V
        Root of ``C_i = V Vᵀ``, shape ``(N, i)``.
    offset
        Constant prior mean.
    A
        The system ``K̂`` the belief is about (for the exact variance).
    num_latent
        ``C``: the posterior presents mean and variance with shape ``(t, C)`` when ``C > 1``.
    """
    with torch.no_grad():
        KV = cross @ torch.cat([weights.unsqueeze(-1), V], dim=1)  # (T, 1 + i)
        mean = offset + KV[:, 0]
        KV = KV[:, 1:]
        var = prior_var - (KV * KV).sum(1)

    def cov() -> torch.Tensor:
        with torch.no_grad():
            return prior_cov() - KV @ KV.mT

    return GaussianPosterior(
        mean, var, cov, lambda: exact_variance(cross, prior_var, A), num_latent=num_latent
    )
