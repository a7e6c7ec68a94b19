"""Gaussian beliefs over the solution of a linear system."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.precision import full_float32
from ..linops.base import LinearOperator
from ..linops.low_rank import LowRank
from ._common import along_directions, direction_columns, draw_prior
from .covariance import DowndatedCovariance
from .priors import Prior

__all__ = ["GaussianSolutionBelief"]


@dataclass(frozen=True, eq=False)
class GaussianSolutionBelief:
    """``x ~ N(mean, Σ_i)`` with ``Σ_i = Σ₀ − V Vᵀ`` after ``i`` observed directions.

    Produced by :class:`~pnsolve.ProbabilisticLinearSolver`; never mutated.

    Attributes
    ----------
    A
        The system operator, shape ``(n, n)``.
    b
        The right-hand side, shape ``(n,)``.
    mean
        Posterior mean ``x_i``, shape ``(n,)``.
    prior
        The prior (``Σ₀``); its mean is the solver's ``x0``.
    V
        Downdate root, shape ``(n, i)``: ``Σ_i = Σ₀ − V Vᵀ``.
    T
        Right factor of the inverse approximation, shape ``(n, i)``:
        ``C_i = V Tᵀ`` and ``x_i = x₀ + C_i r₀``. Equal to ``V`` under the inverse prior.
    W
        Normalised observation images, shape ``(n, i)``: ``Σ_i = (I − V Wᵀ) Σ₀ (I − V Wᵀ)ᵀ``.
        Equal to ``A V`` under the inverse prior.
    calibrated
        Whether the belief is exact Gaussian inference, so that on solutions drawn from
        the prior the error ``x* − mean`` is distributed as ``N(0, Σ_i)``: ``True`` iff
        every action came from a non-adaptive policy (``policy.adaptive`` is ``False``:
        the actions never depended on ``b``) and no buffer of unknown provenance was
        replayed. Set by :class:`~pnsolve.ProbabilisticLinearSolver`; ``False`` (no
        claim) for beliefs built elsewhere unless their constructor says otherwise.
        An uncalibrated covariance (e.g. CG's) is a heuristic, not an error bar.
    """

    A: LinearOperator
    b: torch.Tensor
    mean: torch.Tensor
    prior: Prior
    V: torch.Tensor
    T: torch.Tensor
    W: torch.Tensor
    calibrated: bool = False

    @property
    def rank(self) -> int:
        """Number of independent directions observed so far (``i``)."""
        return self.V.shape[1]

    @property
    def inverse_approx(self) -> LowRank:
        """``C_i`` as a low-rank operator: ``L Lᵀ`` with root ``L = V`` under the inverse prior.

        Under the inverse prior ``C_i = S (Sᵀ A S)⁻¹ Sᵀ ≼ A⁻¹``; in general ``C_i = V Tᵀ``.
        """
        if self.T is self.V:
            return LowRank(self.V)
        return LowRank(self.V, self.T)

    @property
    def cov(self) -> DowndatedCovariance:
        """``Σ_i = Σ₀ − V Vᵀ`` as a linear operator.

        Under the inverse prior its products need ``A⁻¹`` (an inner solve to working
        precision each time): for study at small ``n``. The cheap parts of the belief
        are :attr:`mean`, :attr:`inverse_approx` and :meth:`downdate_variance`.
        """
        return DowndatedCovariance(self.prior.covariance(self.A), self.V)

    @full_float32
    def downdate_variance(self, directions: torch.Tensor) -> torch.Tensor:
        """``uᵀ V Vᵀ u`` per direction: how much variance the computation has removed.

        Parameters
        ----------
        directions
            ``(n,)`` or ``(n, m)``.

        Returns
        -------
        torch.Tensor
            Shape ``()`` or ``(m,)``. Cheap: ``O(n i m)``, no product with ``A``.
        """
        return along_directions(directions, self.mean, self._downdate, "m")

    @full_float32
    def var(self, directions: torch.Tensor) -> torch.Tensor:
        """Variance ``uᵀ Σ_i u`` along each direction ``u``.

        Parameters
        ----------
        directions
            ``(n,)`` or ``(n, m)``, as for :meth:`downdate_variance`.

        Returns
        -------
        torch.Tensor
            Shape ``()`` or ``(m,)``. Needs ``uᵀ Σ₀ u``: one inner solve per direction
            under the inverse prior.
        """

        def variance(U: torch.Tensor) -> torch.Tensor:
            return (self.prior.variance(self.A, U) - self._downdate(U)).clamp_min(0.0)

        return along_directions(directions, self.mean, variance, "m")

    @full_float32
    def diagonal(self) -> torch.Tensor:
        """Marginal variances ``diag(Σ_i)``, shape ``(n,)`` (needs a structured ``Σ₀`` diagonal)."""
        return self.cov.diagonal()

    @full_float32
    def trace(self) -> torch.Tensor:
        """``tr(Σ_i) = tr(Σ₀) − ‖V‖²_F`` where ``Σ₀`` has a structured diagonal."""
        return self.prior.covariance(self.A).trace() - (self.V * self.V).sum()

    @full_float32
    def expected_squared_residual(self) -> torch.Tensor:
        """``E‖A (x − mean)‖²`` for ``x`` drawn from the belief: ``tr(A Σ_i A)``, 0-d tensor.

        Under the inverse prior ``A Σ_i A = A − W Wᵀ``, so this is ``tr A − ‖W‖²_F``:
        cheap, no product with ``A`` (``A`` needs a structured diagonal). A calibrated
        belief predicts the squared norm of the true residual ``b − A mean`` in
        expectation over prior draws; the ratio of the observed to this predicted value
        is the residual rescaling heuristic of
        :meth:`pnsolve.gp.IterGP.posterior` (``comp_var_scale="residual"``).

        Raises
        ------
        ValueError
            Under a prior other than the inverse prior (there ``tr(A Σ₀ A)`` needs
            products).
        """
        if not self.prior.shares_factors:
            raise ValueError(
                f"expected_squared_residual needs the inverse prior (W = A V), got {self.prior!r}"
            )
        return self.A.trace() - (self.W * self.W).sum()

    @full_float32
    def sample(self, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``k`` draws from the belief, shape ``(n, k)``.

        Uses ``x = mean + (I − V Wᵀ) y`` with ``y ~ N(0, Σ₀)``; under the inverse prior
        drawing ``y`` runs Lanczos to working precision (expensive, for study).

        Parameters
        ----------
        k
            Number of samples, ``k ≥ 1``.
        generator
            The only source of randomness.
        """
        Y = draw_prior(self.prior, self.A, k, generator)
        return self.mean.unsqueeze(-1) + Y - self.V @ (self.W.mT @ Y)

    def to_probnum(self, dense: bool = False):
        """The belief as ``probnum.randvars.Normal`` (needs probnum).

        See :func:`pnsolve.beliefs.probnum_interop.to_probnum`.
        """
        from .probnum_interop import to_probnum

        return to_probnum(self, dense=dense)

    def _downdate(self, U: torch.Tensor) -> torch.Tensor:
        """``uᵀ V Vᵀ u`` for the columns ``u`` of ``U`` ``(n, m)``; shape ``(m,)``."""
        return ((self.V.mT @ U) ** 2).sum(0)

    def _directions(self, directions: torch.Tensor) -> torch.Tensor:
        """The checked directions as columns, shape ``(n, m)`` (``m = 1`` for one direction)."""
        return direction_columns(directions, self.mean, "m")

    def __repr__(self) -> str:
        return (
            f"GaussianSolutionBelief(n={self.mean.shape[0]}, rank={self.rank}, "
            f"prior={self.prior!r}, calibrated={self.calibrated}, dtype={self.mean.dtype})"
        )
