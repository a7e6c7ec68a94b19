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
from .love import LoveCache
from .love_sampling import sampling_root

__all__ = ["GridLove"]


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

    def project(
        self, Xs: torch.Tensor, weights: torch.Tensor, offset: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mean, P, prior_var)`` at ``Xs`` ``(t, d)`` from the grid: ``O(4ᵈ k)`` per point.

        ``mean = μ + w(x)ᵀ a`` ``(t,)`` (``a = K_UU W_Xᵀ weights``: :meth:`mean_for`), the
        LOVE projection ``P = W_s root`` ``(t, k)`` (``P Pᵀ = k(Xs, X) R Rᵀ k(X, Xs)``) and
        the SKI prior variance ``w(x)ᵀ K_UU w(x)`` ``(t,)``: what
        :func:`~pnsolve.gp.love_posterior.love_posterior` makes the posterior of.
        """
        with torch.no_grad():
            Ws = self.grid.interpolation(Xs, "Xs")  # (t, m), 4ᵈ weights per row
            mean = offset + Ws @ self.mean_for(weights)
            P = (Ws @ self.root).contiguous()  # (t, k)
            prior_var = self.kernel.stencil_quadratic_form(self.grid, Ws.values, self.stencil)
        return mean, P, prior_var

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
