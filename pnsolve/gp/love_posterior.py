"""GP posteriors from a LOVE cache (shared by ExactGP and IterGP)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..kernels.base import StationaryKernel
from ..kernels.kernel_matrix import KernelMatrix
from ..linops.base import LinearOperator
from ._checks import check_inputs
from .love import LoveCache, default_probe
from .love_sampling import lanczos_root, predictive_covariance
from .posterior import GaussianPosterior

__all__ = ["LoveCacheBuilder", "love_posterior", "resolve_love_cache"]


def resolve_love_cache(
    A: LinearOperator,
    kernel: StationaryKernel,
    X: torch.Tensor,
    Xs: torch.Tensor | None,
    rank: int,
    probe: torch.Tensor | None,
    cache: LoveCache | None,
    backend: str,
    fallback_probe: torch.Tensor,
) -> LoveCache:
    """``cache`` if given (checked to belong to ``A``), else a new cache of ``A``.

    The probe of a new cache: ``probe`` if given, else ``k(X, Xs)`` averaged over the
    test points (the paper's choice) when ``Xs`` is given, else ``fallback_probe``.
    """
    if cache is not None:
        if not isinstance(cache, LoveCache):
            raise TypeError(f"cache must be a LoveCache, got {type(cache).__name__}")
        if cache.A is not A:
            raise ValueError(
                "cache was built for a different K̂ (another model or an earlier fit); "
                "build it with this model's build_love_cache()"
            )
        return cache
    with torch.no_grad():
        if probe is None:
            probe = default_probe(kernel, X, Xs, backend) if Xs is not None else fallback_probe
        return LoveCache.build(A, probe, rank)


def love_posterior(
    *,
    kernel: StationaryKernel,
    X: torch.Tensor,
    Xs: torch.Tensor,
    weights: torch.Tensor,
    prior_mean: float,
    cache: LoveCache,
    backend: str,
    math_var: Callable[[], torch.Tensor],
) -> GaussianPosterior:
    """Mean ``μ + k(Xs, X) w`` and LOVE variances from one matrix-free pass over ``k(Xs, X)``.

    ``k(Xs, X) [w, R]`` is computed tile by tile (no ``(t, n)`` block), so the per-point
    cost after the cache is ``O(n (k + 1))`` kernel-times-vector work.

    Parameters
    ----------
    kernel, X, Xs
        Kernel, training inputs ``(n, d)``, test inputs ``(t, d)``.
    weights
        Representer weights ``(n,)`` (exact ``K̂⁻¹(y − μ)`` or the solver's mean).
    prior_mean
        Constant prior mean ``μ``.
    cache
        The LOVE cache of ``K̂``.
    backend
        Kernel-matrix backend for the cross-covariance and the test covariance.
    math_var
        Callable returning the exact posterior variance (computed on demand).

    Returns
    -------
    GaussianPosterior
        ``var`` from LOVE (``≥`` exact), ``comp_var = var − math_var``, ``cov()``, and
        ``sample(s, generator)`` through a second Lanczos of rank ``cache.rank`` on the
        test covariance (:func:`~pnsolve.gp.love_sampling.lanczos_root`).
    """
    with torch.no_grad():
        cross = KernelMatrix(kernel, Xs, X, backend=backend)  # (t, n), never formed
        KV = cross @ torch.cat([weights.unsqueeze(-1), cache.R], dim=1)  # (t, 1 + k)
        mean = prior_mean + KV[:, 0]
        P = KV[:, 1:].contiguous()
        var = cache.variance_from_projection(P, kernel.diag(Xs))

    def cov() -> torch.Tensor:
        with torch.no_grad():
            return kernel(Xs) - P @ P.mT

    def root() -> torch.Tensor:
        with torch.no_grad():
            C = predictive_covariance(KernelMatrix(kernel, Xs, backend=backend), P)
            start = var if bool((var > 0).any()) else torch.ones_like(var)
            return lanczos_root(C, cache.rank, start)

    return GaussianPosterior(mean, var, cov, math_var, root=root)


class LoveCacheBuilder:
    """Mixin giving a fitted GP model :meth:`build_love_cache`.

    The model provides ``A`` (``K̂``), ``kernel``, ``X``, ``y``, ``mean``,
    ``_require_fit()`` and ``_kernel_backend``.
    """

    _kernel_backend: str = "auto"

    def build_love_cache(
        self, rank: int = 50, probe: torch.Tensor | None = None, Xs: torch.Tensor | None = None
    ) -> LoveCache:
        """A LOVE cache of ``K̂`` to reuse across ``posterior(..., cache=...)`` calls.

        Parameters
        ----------
        rank
            Lanczos steps (products with ``K̂``).
        probe
            Starting vector, shape ``(n,)``. Default: ``k(X, Xs)`` averaged over ``Xs``
            when ``Xs`` is given, else the centred targets ``y − μ`` (the Krylov space
            of CG on the training system).
        Xs
            Representative test inputs, shape ``(t, d)``, for the default probe.

        Returns
        -------
        LoveCache
            The cache, also kept as ``self.love_cache``.
        """
        from .love import check_rank

        self._require_fit()
        check_rank(rank)
        if Xs is not None:
            Xs = check_inputs(Xs, "Xs", self.X.shape[1], like=self.X)
        cache = resolve_love_cache(
            self.A,
            self.kernel,
            self.X,
            Xs,
            rank,
            probe,
            None,
            self._kernel_backend,
            self.y - self.mean,
        )
        self.love_cache = cache
        return cache
