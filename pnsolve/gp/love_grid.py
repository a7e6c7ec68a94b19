"""LOVE for SKI kernels: the cache in grid space, constant time per test point.

Pleiss, Gardner, Weinberger & Wilson (2018), §3.2–3.3. With ``k(X, x) = W_X K_UU w(x)``
the LOVE projection of a test point is ``Rᵀ k(X, x) = (K_UU W_Xᵀ R)ᵀ w(x)``: the
``(m, k)`` matrix ``K_UU W_Xᵀ R`` does not depend on the test points, and ``w(x)`` has
``4ᵈ`` entries, so after it is computed a variance costs ``O(4ᵈ k)`` (plus ``O(16ᵈ)``
for the SKI prior variance ``w(x)ᵀ K_UU w(x)``), independent of ``n`` and ``m``. The
mean uses ``a = K_UU W_Xᵀ v`` (KISS-GP's constant-time mean).

Samples. ``posterior.sample`` takes a rank-``k`` Lanczos root of the *test* covariance
``W_s K_UU W_sᵀ − P Pᵀ`` (``k`` products, each ``O(t 4ᵈ + m log m)``: independent of
``n``), which is accurate where the test points are. The paper's §3.3 root of the
*grid* covariance ``K_UU − (K_UU W_Xᵀ R)(K_UU W_Xᵀ R)ᵀ`` (:attr:`GridLove.sampling_root`,
:meth:`GridLove.sample`) is computed once and reused for every test set (``O(s k (t 4ᵈ
+ m))`` per ``s`` draws), but its top ``k`` directions are those of the whole grid —
dominated by the prior variance where there are no data — so at test points inside
the data it captures less of the covariance at the same rank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import torch

from .._core import random as rnd
from .._core.validation import check_positive_int, require_generator
from ..kernels.grid import Grid
from ..kernels.grid_interpolation import GridInterpolation
from ..kernels.ski_matrix import GridInterpolationMatrix
from ..linops.base import LinearOperator
from ..linops.interpolation import SparseInterpolation
from .belief_posterior import exact_variance
from .love import LoveCache
from .love_sampling import sampling_root
from .posterior import GaussianPosterior

__all__ = ["GridLove", "grid_love_posterior"]


@dataclass(frozen=True, eq=False)
class GridLove:
    """The grid-space part of a LOVE cache of a SKI model.

    Attributes
    ----------
    kernel
        The (grid-bound) :class:`~pnsolve.kernels.GridInterpolation` kernel.
    grid
        Its grid (``m`` points).
    grid_matrix
        ``K_UU`` ``(m, m)`` at the hyperparameters of the fit (FFT products).
    root
        ``K_UU W_Xᵀ R``, shape ``(m, k)``: a test point's LOVE projection is
        ``rootᵀ w(x)``.
    mean
        ``K_UU W_Xᵀ v`` for the model's representer weights ``v``, shape ``(m,)``.
    weights
        The weights ``v`` ``(n,)`` the mean was computed from (a posterior asked with
        other weights, e.g. a later iteration of ``IterGP.iterate``, recomputes its mean).
    interpolation
        ``W_X`` ``(n, m)`` of the training inputs.
    stencil
        The ``4ᵈ × 4ᵈ`` block of ``K_UU`` every stencil sees (prior variances).
    """

    kernel: GridInterpolation
    grid: Grid
    grid_matrix: LinearOperator
    root: torch.Tensor
    mean: torch.Tensor
    weights: torch.Tensor
    interpolation: SparseInterpolation
    stencil: torch.Tensor

    @classmethod
    def build(cls, cache: LoveCache, K: GridInterpolationMatrix, weights: torch.Tensor) -> GridLove:
        """Project the cache's root ``R`` ``(n, k)`` and ``weights`` ``(n,)`` onto the grid.

        ``K`` is the SKI training operator ``W_X K_UU W_Xᵀ``. One sparse product with
        ``W_Xᵀ`` and one FFT product with ``K_UU`` over ``k + 1`` columns:
        ``O((n 4ᵈ + m log m) k)``.
        """
        with torch.no_grad():
            RW = torch.cat([weights.unsqueeze(-1), cache.R], dim=1)
            G = K.grid_matrix @ K.left.rmatmat(RW)  # (m, 1 + k)
            stencil = K.kernel.stencil_block(K.grid, K.dtype, K.device)
        return cls(
            K.kernel, K.grid, K.grid_matrix, G[:, 1:].contiguous(), G[:, 0].contiguous(),
            weights, K.left, stencil,
        )  # fmt: skip

    def mean_for(self, weights: torch.Tensor) -> torch.Tensor:
        """``K_UU W_Xᵀ weights`` ``(m,)``: :attr:`mean` when ``weights`` are the cache's."""
        if weights is self.weights:
            return self.mean
        with torch.no_grad():
            return self.grid_matrix @ self.interpolation.rmatmat(weights)

    @cached_property
    def sampling_root(self) -> torch.Tensor:
        """``S`` ``(m, k')`` with ``S Sᵀ ≈ K_UU − root rootᵀ`` (Lanczos, first use only)."""
        with torch.no_grad():
            prior_var = self.grid_matrix.diagonal()
            var = prior_var - (self.root * self.root).sum(1)
            return sampling_root(self.grid_matrix, self.root, var, self.root.shape[1])

    def sample(
        self, Xs: torch.Tensor, num_samples: int, generator: torch.Generator
    ) -> torch.Tensor:
        """The paper's amortised joint draws ``W_s (a + S z)`` at ``Xs`` ``(t, d)``: ``(t, s)``.

        Pleiss et al. §3.3: ``z ~ N(0, I_k')``, ``S`` = :attr:`sampling_root` (built on
        first use, then reused for every test set). The mean is the fit's
        (``μ`` not added: add the model's constant mean).
        """
        generator = require_generator(generator)
        num_samples = check_positive_int(num_samples, "num_samples")
        Xs, _ = self.kernel.check_inputs(Xs)
        Ws = self.grid.interpolation(Xs, "Xs")
        S = self.sampling_root
        with torch.no_grad():
            shape = (S.shape[1], num_samples)
            z = rnd.randn(shape, generator=generator, dtype=S.dtype, device=S.device)
            return Ws @ (self.mean.unsqueeze(-1) + S @ z)


def grid_love_posterior(
    *,
    cache: LoveCache,
    grid: GridLove,
    Xs: torch.Tensor,
    X: torch.Tensor,
    weights: torch.Tensor,
    offset: float,
    math_var: Callable[[], torch.Tensor] | None,
    calibrated: bool,
) -> GaussianPosterior:
    """LOVE's posterior at ``Xs`` ``(t, d)`` from the grid-space cache: ``O(4ᵈ k)`` per point.

    ``mean = μ + w(x)ᵀ a`` (``a = K_UU W_Xᵀ weights``, kept in the cache for the weights
    it was built with, else one product), ``var = w(x)ᵀ K_UU w(x) − ‖rootᵀ w(x)‖²`` (checked
    nonnegative), ``cov()`` from the dense SKI prior on demand, ``sample`` through a
    rank-``k`` Lanczos root of the test covariance with the structured SKI prior;
    ``math_var`` (on demand) by CG with ``K̂``.
    """
    kernel = grid.kernel
    with torch.no_grad():
        Ws = grid.grid.interpolation(Xs, "Xs")  # (t, m), 4ᵈ weights per row
        mean = offset + Ws @ grid.mean_for(weights)
        P = (Ws @ grid.root).contiguous()  # (t, k)
        prior_var = kernel.stencil_quadratic_form(grid.grid, Ws.values, grid.stencil)
        var = cache.variance_from_projection(P, prior_var)

    def cov() -> torch.Tensor:
        with torch.no_grad():
            return kernel(Xs) - P @ P.mT

    def root() -> torch.Tensor:
        prior = kernel.linop(Xs)  # W_s K_UU W_sᵀ: O(t 4ᵈ + m log m) per product
        return sampling_root(prior, P, var, cache.rank)

    def exact() -> torch.Tensor:
        return exact_variance(kernel.linop(Xs, X), prior_var, cache.A)

    return GaussianPosterior(
        mean,
        var,
        cov,
        exact if math_var is None else math_var,
        root=root,
        love_cache=cache,
        calibrated=calibrated,
    )
