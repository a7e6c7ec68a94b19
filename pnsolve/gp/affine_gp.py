"""AffineGP: GP regression whose solve is an affine iterative method (CAGP-GS and relatives)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .._core.precision import full_float32
from ..beliefs.affine import AffineSolutionBelief
from ..iterative.affine import AffineMethod, AffineSolveInfo, affine_solve
from ..iterative.system import KernelSystem
from ..kernels.kernel import Kernel
from ..kernels.kernel_matrix import KernelMatrix
from ._checks import (
    check_backend,
    check_inputs,
    check_matrix_free_kernel,
    check_mean,
    check_noise,
    check_targets,
)
from ._fitted import FitRecord, FittedModel, readout
from .belief_posterior import exact_variance
from .fit_state import own_copy
from .posterior import GaussianPosterior

__all__ = ["AffineGP", "AffineGPFitState", "AffinePosterior"]


@dataclass(frozen=True)
class AffineGPFitState(FitRecord):
    """What :meth:`AffineGP.fit` computed, and from what (never modified).

    The fields of every model's ``FitRecord`` (``provenance``, ``X``, ``y``, ``A``: here
    ``K̂`` as a counted :class:`~pnsolve.iterative.KernelSystem`) and:

    Attributes
    ----------
    belief
        The method's :class:`~pnsolve.beliefs.AffineSolutionBelief` (``Σ₀ = K̂⁻¹``).
    info
        The sweeps' :class:`~pnsolve.iterative.AffineSolveInfo`.
    """

    belief: AffineSolutionBelief
    info: AffineSolveInfo


class AffinePosterior(GaussianPosterior):
    """The :class:`GaussianPosterior` of an :class:`AffineGP`; ``calibrated`` is ``True``.

    Same interface (``mean``, ``var`` combined, ``math_var``, ``comp_var``, ``cov()``,
    ``sample(...)``).
    """

    def __init__(
        self,
        mean: torch.Tensor,
        var: torch.Tensor,
        cov: Callable[[], torch.Tensor],
        math_var: Callable[[], torch.Tensor],
        var_scale: torch.Tensor | None = None,
    ) -> None:
        super().__init__(mean, var, cov, math_var, var_scale=var_scale)
        #: ``True``: on data drawn from the GP prior, ``f(x) − mean`` has exactly the
        #: variance :attr:`var` (affine methods never look at ``y`` to decide anything).
        self.calibrated = True


class AffineGP(FittedModel[AffineGPFitState]):
    """Computation-aware GP regression with an affine iterative solve (Hegde, Adil & Cockayne 2025).

    :meth:`fit` runs ``m`` sweeps of an affine method (``method``, e.g.
    ``pn.iterative.GaussSeidel(sweeps=5)``: CAGP-GS) on ``K̂ = K(X, X) + σ² I`` for the
    representer weights ``v* = K̂⁻¹ (y − μ)``: ``v_m = P_m (y − μ)``. Under the GP prior
    ``y − μ ~ N(0, K̂)``, so ``v* ~ N(0, K̂⁻¹)`` and the method's belief is
    ``v* ~ N(v_m, E K̂⁻¹ Eᵀ)`` with ``E = I − P_m K̂``
    (:class:`~pnsolve.beliefs.AffineSolutionBelief`, prior ``Σ₀ = K̂⁻¹``). With
    ``k = k(X, x)`` the posterior at test inputs is

    * mean ``μ + kᵀ v_m``,
    * combined variance (mathematical + computational)
      ``k(x, x) − kᵀK̂⁻¹k + kᵀ E K̂⁻¹ Eᵀ k = k(x, x) − 2 kᵀ P_m k + kᵀ P_m K̂ P_mᵀ k``
      (expand ``E K̂⁻¹ Eᵀ = K̂⁻¹ − P_m − P_mᵀ + P_m K̂ P_mᵀ``; ``kᵀP_mᵀk = kᵀP_m k``).
      With ``w = P_mᵀ k``: ``var = k(x, x) − 2 kᵀw + wᵀ K̂ w``;
    * covariance ``k(Xs, Xs) − K_XsX W − Wᵀ K_XXs + Wᵀ K̂ W`` with ``W = P_mᵀ k(X, Xs)``;
    * ``comp_var = var − math_var = ‖K̂⁻¹k − w‖²_K̂ ≥ 0``, ``math_var`` the exact GP's
      ``k(x, x) − kᵀK̂⁻¹k`` (on demand: exact solves).

    The posterior is **calibrated** (``posterior.calibrated``): for
    ``f ~ GP(μ, k)``, ``y = f(X) + ε``, ``f(x) − mean`` has exactly the variance ``var``,
    because ``f(x) − kᵀv_m = (f(x) − kᵀK̂⁻¹y) + kᵀE(K̂⁻¹y)`` is a sum of independent
    Gaussian terms with variances ``math_var`` and ``comp_var``. The combined variance
    never falls below the exact GP's, and ``m → ∞`` reproduces the exact GP for a
    convergent method.

    Parameters
    ----------
    kernel
        A family of :mod:`pnsolve.kernels` or an expression of them.
    noise
        Observation-noise variance ``σ² > 0``.
    method
        An :class:`~pnsolve.iterative.AffineMethod` with its ``sweeps``:
        :class:`~pnsolve.iterative.GaussSeidel`, :class:`~pnsolve.iterative.JacobiIteration`,
        :class:`~pnsolve.iterative.Richardson`, :class:`~pnsolve.iterative.Chebyshev`
        (pass ``lower=noise``: ``λ_min(K̂) ≥ σ²``) or
        :class:`~pnsolve.iterative.CyclicProjections`.
    mean
        Constant prior mean ``μ``.
    backend
        :class:`~pnsolve.iterative.KernelSystem` backend: ``"auto"``, ``"dense"``
        (stores ``K``), ``"chunked"`` or ``"keops"`` (matrix-free). Gauss–Seidel and
        alternating projections read rows of ``K̂``, recomputed every pass when
        matrix-free.

    Notes
    -----
    A query after the kernel's hyperparameters, ``noise`` or ``mean`` changed since
    :meth:`fit` (an optimiser step, ``k.lengthscale = …``, ``load_state_dict``) runs the
    sweeps again on the same data first: answers always follow the current
    hyperparameters. Training data written in place since the fit are refused
    (:class:`~pnsolve.gp.fit_state.FitChangedError`).

    Why a new class and not ``IterGP(..., method=...)``: ``IterGP(kernel, noise, policy,
    stopping)`` is a fixed public signature and conditions a Gaussian on
    actions (``C_i = S(SᵀK̂S)⁻¹Sᵀ``, low rank); an affine method's ``P_m`` is neither an
    action policy nor low rank, and its variance needs ``P_mᵀ`` on the test
    cross-covariances. Both return a :class:`~pnsolve.gp.GaussianPosterior`.

    *Cost.* Fit: ``m`` sweeps on one column (see the method; :attr:`info`). Posterior at
    ``t`` test points: the ``(n, t)`` cross-covariance, ``m`` sweeps of the transposed
    method on its ``t`` columns (``P_mᵀ k``) and one product ``K̂ W``: about ``m + 1``
    passes over ``K̂`` (``2m + 1`` for symmetric Gauss–Seidel) with ``t`` columns, and
    ``O(n t)`` memory — unlike IterGP's rank-``i`` ``k(Xs, X) V``, the variance costs as
    much as ``t`` more solves. The exact split (``math_var``) runs ``t`` CG solves.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.linspace(0, 1, 50, dtype=torch.float64).unsqueeze(-1)
    >>> y = torch.sin(6 * X[:, 0])
    >>> gp = pn.gp.AffineGP(pn.kernels.RBF(lengthscale=0.2), 0.1,
    ...                     pn.iterative.GaussSeidel(sweeps=3)).fit(X, y)
    >>> post = gp.posterior(X[:4])
    >>> post.calibrated, bool((post.comp_var >= 0).all())
    (True, True)
    """

    #: Posteriors of affine methods are calibrated (see the class notes).
    calibrated = True

    def __init__(
        self,
        kernel: Kernel,
        noise: float,
        method: AffineMethod,
        mean: float = 0.0,
        *,
        backend: str = "auto",
    ) -> None:
        if not isinstance(method, AffineMethod):
            raise TypeError(
                f"method must be a pnsolve.iterative.AffineMethod (GaussSeidel, JacobiIteration, "
                f"Richardson, Chebyshev, CyclicProjections), got {type(method).__name__}"
            )
        self.kernel = check_matrix_free_kernel(kernel, "AffineGP")
        self.noise = check_noise(noise)
        self.method = method
        self.mean = float(check_mean(mean))
        self.backend = check_backend(backend)

    def system(self, X: torch.Tensor) -> KernelSystem:
        """``K̂ = K(X, X) + σ² I`` as a counted :class:`~pnsolve.iterative.KernelSystem`."""
        return KernelSystem(self.kernel, X, self.noise, backend=self.backend)

    @full_float32
    def fit(self, X: torch.Tensor, y: torch.Tensor) -> AffineGP:
        """Run ``m`` sweeps on ``K̂ v = y − μ``; keeps the belief and the info.

        Parameters
        ----------
        X
            Training inputs, shape ``(n, d)``.
        y
            Targets, shape ``(n,)``.

        Returns
        -------
        AffineGP
            ``self``; ``self.belief`` (an :class:`~pnsolve.beliefs.AffineSolutionBelief`
            with ``Σ₀ = K̂⁻¹``), ``self.info`` (an
            :class:`~pnsolve.iterative.AffineSolveInfo`) and ``self.A`` (``K̂``).
        """
        X = check_inputs(X, "X")
        y = check_targets(y, X)
        X, y = own_copy(X), own_copy(y)  # the fit's own data: later writes do not reach it
        provenance = self._provenance(X, y)
        A = self.system(X)
        with torch.no_grad():
            belief, info = affine_solve(A, y - self.mean, self.method, prior="inverse")
        self._store(AffineGPFitState(provenance, X, y, A, belief, info))
        return self

    def _refit(self, record: AffineGPFitState) -> None:
        self.fit(record.X, record.y)

    belief: AffineSolutionBelief = readout("belief")
    """The method's belief of the current fit."""

    info: AffineSolveInfo = readout("info")
    """The sweeps' info of the current fit."""

    @full_float32
    def posterior(self, Xs: torch.Tensor) -> AffinePosterior:
        """Posterior at test inputs ``Xs`` of shape ``(t, d)`` (fits again first if stale).

        Parameters
        ----------
        Xs
            Test inputs, shape ``(t, d)``.

        Returns
        -------
        AffinePosterior
            ``mean``, ``var`` (combined: ``k(x,x) − 2kᵀP_m k + kᵀP_m K̂ P_mᵀk``, never
            negative: rounding-level negatives are set to 0, clearly negative ones raise
            :class:`~pnsolve.gp.posterior.NegativeVarianceError`),
            ``math_var`` and ``comp_var`` (on demand: ``t`` exact solves), ``cov()``,
            ``sample(...)``, ``calibrated = True``.
        """
        record = self._fitted()
        X = record.X
        Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        A, P = record.A, record.belief.P
        with torch.no_grad():
            K = self.kernel(X, Xs)  # (n, t)
            prior_var = self.kernel.diag(Xs)
            W = P.rmatmat(K)  # P_mᵀ k(X, Xs): m sweeps of the transposed method
            KW = A @ W
            mean = self.mean + K.mT @ record.belief.mean
            cross, energy = (K * W).sum(0), (W * KW).sum(0)
            var = prior_var - 2.0 * cross + energy
            size = prior_var.abs() + 2.0 * cross.abs() + energy.abs()  # the terms' size

        def cov() -> torch.Tensor:
            with torch.no_grad():
                cross = K.mT @ W
                return self.kernel(Xs) - cross - cross.mT + W.mT @ KW

        def math_var() -> torch.Tensor:
            return exact_variance(
                KernelMatrix(self.kernel, Xs, X, backend=self.backend), prior_var, A
            )

        post = AffinePosterior(mean, var, cov, math_var, var_scale=size)
        self._tie(post, record)
        return post

    def __repr__(self) -> str:
        return (
            f"AffineGP({type(self.kernel).__name__}, noise={float(self.noise):.4g}, "
            f"method={self.method!r})"
        )
