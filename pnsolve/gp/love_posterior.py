"""LOVE posteriors of GP regression models: the belief posterior of the cache.

A :class:`~pnsolve.gp.LoveCache` of ``K̂`` is the CG belief after ``k`` Lanczos steps
(``C_k = Q T⁻¹ Qᵀ = R Rᵀ``), so LOVE's mean and variances come from the same projection
(:func:`~pnsolve.gp.belief_posterior.project_belief`) as IterGP's belief posterior, with
the root ``V = R``. What LOVE adds lives here, not in the general
:class:`~pnsolve.gp.GaussianPosterior`: the :class:`LovePosterior` subclass carries the
cache (``love_cache``) and samples through a low-rank root (a second Lanczos on the test
covariance).

:class:`~pnsolve.gp.ExactGP` and :class:`~pnsolve.gp.IterGP` answer
``posterior(Xs, method="love", ...)`` and ``build_love_cache(...)`` through the two
functions here. Both are pure queries: a cache built for one call is handed back on the
posterior (``post.love_cache``), never stored on the model. For a SKI kernel
(:class:`~pnsolve.kernels.GridInterpolation`) the cache also holds its projection onto
the grid (:mod:`pnsolve.gp.love_grid`) and a test point costs ``O(4ᵈ k)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from .._core import random as rnd
from .._core.precision import full_float32
from ..kernels.grid_interpolation import GridInterpolation
from ..kernels.kernel import Kernel
from ..linops.base import LinearOperator
from .belief_posterior import exact_variance, project_belief
from .love import LoveCache, default_probe
from .love_grid import GridLove
from .love_sampling import sampling_root
from .posterior import GaussianPosterior

__all__ = ["LovePosterior", "love_posterior", "resolve_love_cache"]


class LovePosterior(GaussianPosterior):
    """The :class:`~pnsolve.gp.GaussianPosterior` of a LOVE query, with its cache.

    Returned by ``posterior(Xs, method="love", ...)`` of :class:`~pnsolve.gp.ExactGP`
    and :class:`~pnsolve.gp.IterGP`. Everything a posterior has (``mean``, ``var``,
    ``math_var``, ``comp_var``, ``cov()``, ``calibrated``, ``tie_to``), plus:

    Attributes
    ----------
    love_cache
        The :class:`~pnsolve.gp.LoveCache` the variances came from (the one passed as
        ``cache=``, or the one built for this call); pass it as ``cache=`` to later
        calls to reuse it.

    Notes
    -----
    :meth:`sample` draws ``mean + S z`` through the low-rank root :meth:`sample_root`
    (``O(t r)`` per draw, no ``t × t`` matrix) instead of a Cholesky factor of
    :meth:`cov`.
    """

    def __init__(
        self,
        mean: torch.Tensor,
        var: torch.Tensor,
        *,
        projection: torch.Tensor,
        prior_cov: Callable[[], torch.Tensor],
        prior_operator: Callable[[], LinearOperator],
        math_var: Callable[[], torch.Tensor],
        cache: LoveCache,
        calibrated: bool,
        var_scale: torch.Tensor | None = None,
    ) -> None:
        P = projection  # k(Xs, X) R, shape (t, k)

        def cov() -> torch.Tensor:
            with torch.no_grad():
                return prior_cov() - P @ P.mT

        super().__init__(mean, var, cov, math_var, calibrated=calibrated, var_scale=var_scale)
        self.love_cache = cache
        self._projection = P
        self._prior_operator = prior_operator
        self._root: torch.Tensor | None = None

    @full_float32
    def sample_root(self) -> torch.Tensor:
        """The low-rank root ``S`` (``S Sᵀ ≈ cov``) used by :meth:`sample`, shape ``(t, r)``.

        A second Lanczos of rank ``love_cache.rank`` on the test covariance
        ``k(Xs, Xs) − P Pᵀ`` (:func:`~pnsolve.gp.love_sampling.sampling_root`),
        computed on first access and kept.
        """
        if self._root is None:
            self._check_current()
            prior = self._prior_operator()
            self._root = sampling_root(
                prior, self._projection, self._flat_var, self.love_cache.rank
            )
        return self._root

    def _deviations(self, s: int, generator: torch.Generator | None) -> torch.Tensor:
        """``S z`` with ``z ~ N(0, I_r)``: ``O(t r)`` per draw through :meth:`sample_root`."""
        S = self.sample_root()
        return S @ rnd.randn((S.shape[1], s), generator=generator, dtype=S.dtype, device=S.device)


def resolve_love_cache(
    A: LinearOperator,
    kernel: Kernel,
    X: torch.Tensor,
    *,
    rank: int,
    probe: torch.Tensor | None,
    Xs: torch.Tensor | None,
    backend: str,
    residual: Callable[[], torch.Tensor],
    weights: torch.Tensor,
    cache: LoveCache | None = None,
    calibrated: bool = False,
) -> LoveCache:
    """``cache`` if given (checked to belong to ``A``), else a new cache of ``A``.

    Parameters
    ----------
    A
        The model's ``K̂``, shape ``(n, n)``.
    kernel, X
        Kernel and training inputs ``(n, d)`` (for the default probe).
    rank
        Lanczos steps of a new cache (already checked by the caller).
    probe
        Starting vector of a new cache, shape ``(n,)``. Default: ``k(X, Xs)`` averaged
        over the test points (the paper's choice) when ``Xs`` is given; else, for a SKI
        kernel, the paper's average column ``W_X K_UU 1 / m`` of ``K_XU``, and for other
        kernels ``residual``.
    Xs
        Test inputs ``(t, d)`` or ``None``.
    backend
        Kernel-matrix backend of the default probe.
    residual
        Callable returning the centred targets ``y − μ``, shape ``(n,)``: the probe
        without ``Xs`` (the Krylov space of CG on the training system); called only when
        a new cache needs it (a query with a given cache does no ``O(n)`` work here).
    weights
        The model's representer weights ``(n,)``: with a SKI kernel a new cache is
        projected onto the grid together with them (:class:`~pnsolve.gp.love_grid.GridLove`).
    cache
        A cache to reuse; then nothing is built.
    calibrated
        Declare that a given ``probe`` does not depend on the targets. A new cache is
        marked ``calibrated`` for the default probe from ``Xs`` (built from the kernel
        and the inputs only), not for the ``residual`` probe (it is ``y``), and for a
        given ``probe`` only when declared.

    Returns
    -------
    LoveCache
        ``cache``, or a new one (``rank + 1`` products with ``A``; for a SKI kernel with
        its ``grid`` part, ``k + 1`` more interpolation and FFT products).

    Raises
    ------
    TypeError
        If ``cache`` is not a :class:`~pnsolve.gp.LoveCache`.
    ValueError
        If ``cache`` was built for another ``K̂``.
    """
    if cache is not None:
        if not isinstance(cache, LoveCache):
            raise TypeError(f"cache must be a LoveCache, got {type(cache).__name__}")
        if cache.A is not A:
            raise ValueError(
                "cache was built for a different K̂ (another model, or an earlier fit of "
                "this one: the model fits again when its hyperparameters change); build "
                "it with this model's build_love_cache()"
            )
        return cache
    with torch.no_grad():
        # a SKI kernel's training operator (no graph): the paper's probe, the grid part
        K = kernel.linop(X) if isinstance(kernel, GridInterpolation) else None
        if probe is None:
            calibrated = Xs is not None or K is not None
            if Xs is not None:
                probe = default_probe(kernel, X, Xs, backend)
            elif K is not None:
                # the paper's b = W_X K_UU 1 / m: depends on neither test points nor targets
                ones = X.new_full((K.grid.size, 1), 1.0 / K.grid.size)
                probe = (K.left @ (K.grid_matrix @ ones)).squeeze(-1)
            else:
                probe = residual()
        built = LoveCache.build(A, probe, rank, calibrated=calibrated)
    if K is not None:
        return dataclasses.replace(built, grid=GridLove.build(built, K, weights))
    return built


def love_posterior(
    *,
    cache: LoveCache,
    kernel: Kernel,
    X: torch.Tensor,
    Xs: torch.Tensor,
    weights: torch.Tensor,
    offset: float,
    backend: str,
    math_var: Callable[[], torch.Tensor] | None = None,
    calibrated: bool | None = None,
) -> LovePosterior:
    """The belief posterior of a LOVE cache, with LOVE's sampling root.

    Mean ``μ + k(Xs, X) w`` and variances ``k(x, x) − ‖Rᵀ k(X, x)‖²`` from one
    matrix-free pass of ``k(Xs, X)`` over ``[w, R]`` (no ``(t, n)`` block:
    :func:`~pnsolve.gp.belief_posterior.project_belief`), so the per-point cost after
    the cache is ``O(n (k + 1))`` kernel-times-vector work. With a grid part (SKI) the
    mean and projection come from the grid (:meth:`~pnsolve.gp.love_grid.GridLove.project`:
    the mean from the grid vector the cache was built with, ``O(4ᵈ k)`` per point).

    Parameters
    ----------
    cache
        The LOVE cache of ``K̂``; its root ``R`` (``C_k = R Rᵀ``) is the belief's.
    kernel, X, Xs
        Kernel, training inputs ``(n, d)``, test inputs ``(t, d)``.
    weights
        Representer weights ``(n,)`` (exact ``K̂⁻¹(y − μ)`` or the solver's mean).
    offset
        Constant prior mean ``μ``.
    backend
        Kernel-matrix backend for the cross-covariance and the test covariance.
    math_var
        Callable returning the exact posterior variance ``(t,)``; default: batched CG
        solves with ``cache.A`` (:func:`~pnsolve.gp.belief_posterior.exact_variance`).
    calibrated
        ``posterior.calibrated``; default ``cache.calibrated`` (whether its probe does
        not depend on ``y``).

    Returns
    -------
    LovePosterior
        ``mean`` and ``var`` ``(t,)`` (``var ≥`` exact; rounding-level negatives are set to
        0, a clearly negative one raises
        :class:`~pnsolve.gp.posterior.NegativeVarianceError`, a ``ValueError``),
        ``comp_var = var − math_var``, ``cov()``, ``sample(s, generator)`` through a
        second Lanczos of rank ``cache.rank`` on the test covariance, and
        ``love_cache = cache``.
    """
    if cache.grid is not None:
        kernel = cache.grid.kernel
        mean, P, prior_var = cache.grid.project(Xs, weights, offset)
        backend = "auto"  # SKI: structured products, whatever the model's backend

        def cross() -> LinearOperator:
            return kernel.linop(Xs, X)
    else:
        prior_var = kernel.diag(Xs)

        def cross() -> LinearOperator:
            return kernel.linop(Xs, X, backend=backend)  # (t, n), never formed

        mean, P = project_belief(cross(), weights, cache.R, offset)
    with torch.no_grad():
        reduction = (P * P).sum(1)
        var = prior_var - reduction

    def exact() -> torch.Tensor:
        return exact_variance(cross(), prior_var, cache.A)

    return LovePosterior(
        mean,
        var,
        projection=P,
        prior_cov=lambda: kernel(Xs),
        prior_operator=lambda: kernel.linop(Xs, backend=backend),
        math_var=exact if math_var is None else math_var,
        cache=cache,
        calibrated=cache.calibrated if calibrated is None else calibrated,
        var_scale=prior_var.abs() + reduction,
    )
