"""GP posteriors from a solver belief over representer weights (IterGP, IterNCGP, LOVE)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..krylov.conjugate_gradient import cg
from ..linops.base import LinearOperator
from .love import LoveCache
from .love_sampling import sampling_root
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
    KXs, W = _exact_solves(cross, A, projector)
    with torch.no_grad():  # like ``var``: a reference value, not a training objective
        return prior_var - (KXs * W).sum(0)


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


def belief_posterior(
    *,
    cross: LinearOperator,
    prior_var: torch.Tensor,
    prior_cov: Callable[[], torch.Tensor],
    weights: torch.Tensor,
    offset: float,
    A: LinearOperator,
    V: torch.Tensor | None = None,
    num_latent: int = 1,
    projector: LinearOperator | None = None,
    math_var: Callable[[], torch.Tensor] | None = None,
    cache: LoveCache | None = None,
    prior_operator: Callable[[], LinearOperator] | None = None,
    calibrated: bool = False,
    comp_var_scale: float = 1.0,
) -> GaussianPosterior:
    """Mean ``offset + k(Xs, X) v`` and covariance ``k(Xs, Xs) − k(Xs, X) V Vᵀ k(X, Xs)``.

    One matrix-free pass of the cross-covariance over ``[v, V]``; the split of the
    variance into mathematical and computational parts is computed on demand
    (:func:`exact_variance`). The one path from a belief ``C = V Vᵀ ≼ A⁻¹`` to a GP
    posterior: IterGP and IterNCGP pass their solver belief's root, LOVE its cache
    (``C_k = R Rᵀ``, the CG belief after ``k`` Lanczos steps).

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
        Root of ``C_i = V Vᵀ``, shape ``(N, i)``; not given with ``cache``.
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
    cache
        A :class:`~pnsolve.gp.LoveCache` of ``A`` whose root ``R`` is the belief's
        (``V = cache.R``): its variances are checked nonnegative
        (:meth:`~pnsolve.gp.LoveCache.variance_from_projection`), the posterior samples
        through a second Lanczos of rank ``cache.rank`` on the test covariance
        (:func:`~pnsolve.gp.love_sampling.sampling_root`) and carries the cache as
        ``love_cache``.
    prior_operator
        With ``cache``: callable returning ``k(Xs, Xs)`` as a (matrix-free) operator,
        shape ``(T, T)``, for the sampling root.
    calibrated
        Whether the belief (or cache) is calibrated: carried as ``posterior.calibrated``.
    comp_var_scale
        ``s > 0`` multiplies the computational part of the covariance:
        ``var = math_var + s · comp_var`` (a heuristic rescaling; ``1`` leaves the
        belief's covariance). ``s ≠ 1`` computes the exact split eagerly (``T`` CG
        solves with ``A``, as for :attr:`~GaussianPosterior.math_var`); not with a
        ``cache``.

    Returns
    -------
    GaussianPosterior
        ``mean`` and ``var`` ``(T,)`` (``(t, C)`` for ``C > 1``), ``cov()``, ``math_var``.
    """
    scale = float(comp_var_scale)
    if not 0.0 < scale < math.inf:
        raise ValueError(f"comp_var_scale must be a positive finite number, got {comp_var_scale!r}")
    if cache is not None:
        if V is not None or prior_operator is None:
            raise ValueError("with a LOVE cache pass prior_operator and no V (V = cache.R)")
        if scale != 1.0:
            raise ValueError("comp_var_scale applies to a solver belief, not to a LOVE cache")
        V = cache.R
    elif V is None:
        raise ValueError("pass the belief's root V (or a LOVE cache)")
    with torch.no_grad():
        WV = torch.cat([weights.unsqueeze(-1), V], dim=1)  # (N, 1 + i)
        if projector is not None:  # the belief is about range P only
            WV = projector @ WV
        KV = cross @ WV  # (T, 1 + i)
        mean = offset + KV[:, 0]
        KV = KV[:, 1:]
        if cache is None:
            var = prior_var - (KV * KV).sum(1)
        else:  # LOVE: the projection k(Xs, X) R, kept for the sampling root
            KV = KV.contiguous()
            var = cache.variance_from_projection(KV, prior_var)

    def cov() -> torch.Tensor:
        with torch.no_grad():
            return prior_cov() - KV @ KV.mT

    def root() -> torch.Tensor:
        # passed on only with a cache, which requires prior_operator (checked above)
        assert cache is not None and prior_operator is not None
        return sampling_root(prior_operator(), KV, var, cache.rank)

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
        root=None if cache is None else root,
        num_latent=num_latent,
        love_cache=cache,
        calibrated=calibrated,
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
        math_var = prior_var - (KXs * W).sum(0)
        rescaled = math_var + scale * (var - math_var)

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
    )
