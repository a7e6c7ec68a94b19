"""GP posteriors from a solver belief over representer weights (IterGP, IterNCGP, LOVE)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..krylov.conjugate_gradient import cg
from ..linops.base import LinearOperator
from .posterior import GaussianPosterior, nonnegative_variance

__all__ = ["belief_posterior", "exact_variance", "project_belief"]


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
    KXs, W = _exact_solves(cross, A, projector)
    with torch.no_grad():  # like ``var``: a reference value, not a training objective
        reduction = (KXs * W).sum(0)
        return nonnegative_variance(
            prior_var - reduction, prior_var.abs() + reduction.abs(), "the exact variance"
        )


def _exact_solves(
    cross: LinearOperator, A: LinearOperator, projector: LinearOperator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(k(X, Xs), A⁺ k(X, Xs))``, both ``(N, T)``, by batched CG to rounding level."""
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
        return KXs, W


def project_belief(
    cross: LinearOperator,
    weights: torch.Tensor,
    V: torch.Tensor,
    offset: float,
    projector: LinearOperator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(offset + k(Xs, X) v, k(Xs, X) V)``: one matrix-free pass of ``cross`` over ``[v, V]``.

    The step every belief posterior starts from (IterGP's and IterNCGP's solver beliefs
    in :func:`belief_posterior`, LOVE's cache with ``V = R`` in
    :func:`~pnsolve.gp.love_posterior.love_posterior`): the mean ``(T,)`` and the
    projection ``(T, i)`` whose squared row norms are the variance reduction. With a
    ``projector`` ``P`` weights and root are projected first (the belief is about
    ``range P`` only).
    """
    with torch.no_grad():
        WV = torch.cat([weights.unsqueeze(-1), V], dim=1)  # (N, 1 + i)
        if projector is not None:  # the belief is about range P only
            WV = projector @ WV
        KV = cross @ WV  # (T, 1 + i)
        return offset + KV[:, 0], KV[:, 1:].contiguous()


def belief_posterior(
    *,
    cross: LinearOperator,
    prior_var: torch.Tensor,
    prior_cov: Callable[[], torch.Tensor],
    weights: torch.Tensor,
    offset: float,
    A: LinearOperator,
    V: torch.Tensor,
    num_latent: int = 1,
    projector: LinearOperator | None = None,
    math_var: Callable[[], torch.Tensor] | None = None,
    calibrated: bool = False,
    comp_var_scale: float = 1.0,
) -> GaussianPosterior:
    """Mean ``offset + k(Xs, X) v`` and covariance ``k(Xs, Xs) − k(Xs, X) V Vᵀ k(X, Xs)``.

    One matrix-free pass of the cross-covariance over ``[v, V]``
    (:func:`project_belief`); the split of the variance into mathematical and
    computational parts is computed on demand (:func:`exact_variance`). The path from a
    solver belief ``C = V Vᵀ ≼ A⁻¹`` to a GP posterior (IterGP, IterNCGP); LOVE's
    posterior (:func:`~pnsolve.gp.love_posterior.love_posterior`) is the same
    projection with the cache's root ``V = R`` (``C_k = R Rᵀ``, the CG belief after
    ``k`` Lanczos steps).

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
    offset
        Constant prior mean.
    A
        The system ``K̂`` the belief is about (for the exact variance).
    V
        Root of ``C_i = V Vᵀ``, shape ``(N, i)``.
    num_latent
        ``C``: the posterior presents mean and variance with shape ``(t, C)`` when ``C > 1``.
    projector
        ``P`` when the belief is about ``range P`` only (e.g. the softmax system
        ``P K P + W⁺``): weights and root are projected before use, so directions
        outside ``range P`` (rounding, or the solver's regularising complement) never
        reach the posterior; see also :func:`exact_variance`.
    math_var
        Callable returning the exact (mathematical) variance ``(T,)`` on demand; default
        :func:`exact_variance` by CG with ``A``.
    calibrated
        Whether the belief is calibrated: carried as ``posterior.calibrated``.
    comp_var_scale
        ``s > 0`` multiplies the computational part of the covariance:
        ``var = math_var + s · comp_var`` (a heuristic rescaling; ``1`` leaves the
        belief's covariance). ``s ≠ 1`` computes the exact split eagerly (``T`` CG
        solves with ``A``, as for :attr:`~GaussianPosterior.math_var`).

    Returns
    -------
    GaussianPosterior
        ``mean`` and ``var`` ``(T,)`` (``(t, C)`` for ``C > 1``), ``cov()``, ``math_var``.
        ``var ≥ 0``: rounding-level negatives are set to 0, clearly negative ones raise
        :class:`~pnsolve.gp.posterior.NegativeVarianceError` (``V Vᵀ ≼ A⁻¹`` violated).
    """
    scale = float(comp_var_scale)
    if not 0.0 < scale < math.inf:
        raise ValueError(f"comp_var_scale must be a positive finite number, got {comp_var_scale!r}")
    mean, KV = project_belief(cross, weights, V, offset, projector)
    with torch.no_grad():
        reduction = (KV * KV).sum(1)
        var = prior_var - reduction

    def cov() -> torch.Tensor:
        with torch.no_grad():
            return prior_cov() - KV @ KV.mT

    def exact() -> torch.Tensor:
        return exact_variance(cross, prior_var, A, projector)

    if scale != 1.0:
        return _rescaled(
            mean, var, KV, cross, prior_var, prior_cov, A, projector, scale, num_latent
        )
    return GaussianPosterior(
        mean,
        var,
        cov,
        exact if math_var is None else math_var,
        num_latent=num_latent,
        calibrated=calibrated,
        var_scale=prior_var.abs() + reduction,
    )


def _rescaled(
    mean: torch.Tensor,
    var: torch.Tensor,
    KV: torch.Tensor,
    cross: LinearOperator,
    prior_var: torch.Tensor,
    prior_cov: Callable[[], torch.Tensor],
    A: LinearOperator,
    projector: LinearOperator | None,
    scale: float,
    num_latent: int,
) -> GaussianPosterior:
    """The posterior with covariance ``math + s · comp`` (exact split computed here).

    Not calibrated by construction: ``s`` is a heuristic, not exact inference.
    """
    KXs, W = _exact_solves(cross, A, projector)
    with torch.no_grad():
        exact_reduction = (KXs * W).sum(0)
        math_var = prior_var - exact_reduction
        rescaled = math_var + scale * (var - math_var)
        size = prior_var.abs() + exact_reduction.abs() + scale * (prior_var - var).abs()
        math_var = nonnegative_variance(math_var, size, "the exact variance")

    def cov() -> torch.Tensor:
        with torch.no_grad():
            prior = prior_cov()
            exact = prior - KXs.mT @ W
            return exact + scale * ((prior - KV @ KV.mT) - exact)

    return GaussianPosterior(
        mean,
        rescaled,
        cov,
        lambda: math_var,
        num_latent=num_latent,
        calibrated=False,
        comp_var_scale=scale,
        var_scale=size,
    )
