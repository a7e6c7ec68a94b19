"""GP posteriors from a solver belief over representer weights (IterGP, IterNCGP)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..krylov.conjugate_gradient import cg
from ..linops.base import LinearOperator
from .posterior import GaussianPosterior

__all__ = ["belief_posterior", "exact_variance"]


def exact_variance(
    cross: LinearOperator,
    prior_var: torch.Tensor,
    A: LinearOperator,
    projector: LinearOperator | None = None,
) -> torch.Tensor:
    """``k(x, x) − k(x, X) A⁺ k(X, x)`` by batched CG to rounding level; shape ``(T,)``.

    Forms the ``(N, T)`` cross-covariance: an analysis path, not the fast one. With a
    ``projector`` ``P`` (``A`` positive definite on ``range P`` only, e.g. the softmax
    system ``P K P + W⁺``) the columns are projected first.

    Raises
    ------
    ArithmeticError
        If CG does not reach the tolerance (an exact split cannot be claimed).
    """
    with torch.no_grad():
        KXs = cross.to_dense().mT
        if projector is not None:
            KXs = projector @ KXs
        rtol = 100 * torch.finfo(KXs.dtype).eps
        W, info = cg(A, KXs, rtol=rtol, maxiter=10 * A.shape[0])
        if not info.success:
            raise ArithmeticError(
                f"the exact variance needs solves with K̂ to relative residual {rtol:.1e}; CG "
                f"stopped with {info.stop_reason.name} after {info.iterations} iterations "
                "(K̂ too ill-conditioned for an iterative reference)"
            )
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
    projector: LinearOperator | None = None,
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
    projector
        ``P`` when the belief is about ``range P`` only (e.g. the softmax system
        ``P K P + W⁺``): weights and root are projected before use, so directions
        outside ``range P`` (rounding, or the solver's regularising complement) never
        reach the posterior; see also :func:`exact_variance`.
    """
    with torch.no_grad():
        WV = torch.cat([weights.unsqueeze(-1), V], dim=1)  # (N, 1 + i)
        if projector is not None:  # the belief is about range P only
            WV = projector @ WV
        KV = cross @ WV  # (T, 1 + i)
        mean = offset + KV[:, 0]
        KV = KV[:, 1:]
        var = prior_var - (KV * KV).sum(1)

    def cov() -> torch.Tensor:
        with torch.no_grad():
            return prior_cov() - KV @ KV.mT

    return GaussianPosterior(
        mean,
        var,
        cov,
        lambda: exact_variance(cross, prior_var, A, projector),
        num_latent=num_latent,
    )
