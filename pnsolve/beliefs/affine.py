"""Beliefs of affine iterative methods ``x_m = x₀ + P_m (b − A x₀)``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..linops.base import LinearOperator
from ._common import along_directions, draw_prior
from .priors import Prior

__all__ = ["AffineCovariance", "AffineSolutionBelief"]


class AffineCovariance(LinearOperator):
    """``Σ_m = E Σ₀ Eᵀ`` with the error propagator ``E = I − P A``; symmetric PSD by construction.

    Parameters
    ----------
    A
        The system operator, shape ``(n, n)``.
    P
        The method's matrix ``P_m`` (``x_m = P_m b`` from ``x₀ = 0``), shape ``(n, n)``,
        with a transposed product (``P.rmatmat``).
    prior_cov
        ``Σ₀``, shape ``(n, n)``.

    Notes
    -----
    A product ``Σ_m X`` is ``Eᵀ X = X − A (P_mᵀ X)``, then ``Σ₀``, then
    ``E Y = Y − P_m (A Y)``: two products with ``A``, one application each of ``P_m``
    and ``P_mᵀ`` (``m`` sweeps each) and one of ``Σ₀`` (under the inverse prior an inner
    solve to working precision: for study at small ``n``). Nothing is densified; there is
    no structured diagonal (use :meth:`AffineSolutionBelief.var` along unit vectors).
    """

    def __init__(self, A: LinearOperator, P: LinearOperator, prior_cov: LinearOperator) -> None:
        super().__init__(A.shape, A.dtype, A.device, is_symmetric=True, is_psd=True)
        self.A = A
        self.P = P
        self.prior_cov = prior_cov

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        Y = self.prior_cov @ (X - self.A @ self.P.rmatmat(X))
        return Y - self.P @ (self.A @ Y)


@dataclass(frozen=True, eq=False)
class AffineSolutionBelief:
    """``x ~ N(x_m, (I − P_m A) Σ₀ (I − P_m A)ᵀ)`` after ``m`` sweeps of an affine method.

    An affine iterative method started at the prior mean ``x₀`` returns
    ``x_m = x₀ + P_m (b − A x₀)`` with a matrix ``P_m`` that depends on ``A`` and ``m``
    only, never on ``b`` (Gauss–Seidel, Jacobi/Richardson, Chebyshev, alternating
    projections with a cyclic block order: :mod:`pnsolve.iterative`). Its error is
    linear in the solution, ``x* − x_m = E (x* − x₀)`` with ``E = I − P_m A``, so for
    ``x* ~ N(x₀, Σ₀)`` it is exactly ``N(0, E Σ₀ Eᵀ)``: the belief is **calibrated** by
    construction (Cockayne et al. 2021; Hegde, Adil & Cockayne 2025). It is the prior
    pushed through the method's error propagation, not the Bayes posterior given
    ``P_m b`` (that one is a point mass whenever ``P_m`` is invertible): the
    computation-aware belief of someone who trusts the iterate and nothing more.

    Produced by :func:`pnsolve.iterative.affine_solve`; never mutated.

    Attributes
    ----------
    A
        The system operator, shape ``(n, n)``.
    b
        The right-hand side, shape ``(n,)``.
    mean
        ``x_m``, shape ``(n,)``.
    prior
        The prior (``Σ₀``); its mean is the method's start ``x0``.
    P
        ``P_m`` as an operator, shape ``(n, n)``: products run ``m`` sweeps from zero,
        transposed products ``m`` sweeps of the transposed method.
    calibrated
        ``True``: on solutions drawn from the prior the errors have exactly the
        belief's covariance.
    """

    A: LinearOperator
    b: torch.Tensor
    mean: torch.Tensor
    prior: Prior
    P: LinearOperator
    calibrated: ClassVar[bool] = True

    @property
    def inverse_approx(self) -> LinearOperator:
        """``P_m ≈ A⁻¹`` (the method's approximate inverse; ``P_m → A⁻¹`` as ``m → ∞``)."""
        return self.P

    @property
    def error_propagator(self) -> LinearOperator:
        """``E = I − P_m A`` (``x* − x_m = E (x* − x₀)``) as an operator with transpose."""
        from ..linops.closure import Closure

        A, P = self.A, self.P
        return Closure(
            lambda X: X - P @ (A @ X),
            A.shape,
            dtype=A.dtype,
            device=A.device,
            rmatmat=lambda X: X - A @ P.rmatmat(X),
        )

    @property
    def cov(self) -> AffineCovariance:
        """``Σ_m = (I − P_m A) Σ₀ (I − P_m A)ᵀ`` as an operator (:class:`AffineCovariance`)."""
        return AffineCovariance(self.A, self.P, self.prior.covariance(self.A))

    def var(self, directions: torch.Tensor) -> torch.Tensor:
        """Variance ``uᵀ Σ_m u = (Eᵀ u)ᵀ Σ₀ (Eᵀ u)`` along each direction ``u``.

        Takes and returns what :meth:`GaussianSolutionBelief.var
        <pnsolve.beliefs.GaussianSolutionBelief.var>` does: ``directions`` of shape
        ``(n,)`` or ``(n, k)``, variances of shape ``()`` or ``(k,)``. Costs one ``P_mᵀ``
        (``m`` sweeps on ``k`` columns), one product with ``A`` and ``uᵀ Σ₀ u`` (an
        inner solve per direction under the inverse prior).
        """
        return along_directions(
            directions,
            self.mean,
            lambda U: self.prior.variance(self.A, U - self.A @ self.P.rmatmat(U)).clamp_min(0.0),
        )

    def sample(self, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``k`` draws ``x_m + E y`` with ``y ~ N(0, Σ₀)``, shape ``(n, k)``.

        ``k`` and ``generator`` as in :meth:`GaussianSolutionBelief.sample
        <pnsolve.beliefs.GaussianSolutionBelief.sample>`. Under the inverse prior
        drawing ``y`` runs Lanczos to working precision (expensive, for study).
        """
        Y = draw_prior(self.prior, self.A, k, generator)
        return self.mean.unsqueeze(-1) + Y - self.P @ (self.A @ Y)

    def __repr__(self) -> str:
        return (
            f"AffineSolutionBelief(n={self.mean.shape[0]}, P={self.P!r}, prior={self.prior!r}, "
            f"dtype={self.mean.dtype})"
        )
