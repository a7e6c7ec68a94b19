"""Priors over the solution ``x`` of ``A x = b``."""

from __future__ import annotations

import abc
import math

import torch

from .._core import random as rnd
from ..linops.base import LinearOperator
from ..linops.scaled_identity import ScaledIdentity
from .inverse import Inverse

__all__ = ["GaussianPrior", "InversePrior", "Prior", "as_prior"]


class Prior(abc.ABC):
    """Covariance ``Σ₀`` of a Gaussian prior ``x ~ N(x₀, Σ₀)`` (the mean is ``x0``).

    A prior tells the belief update what ``Σ₀`` does to the observation directions
    ``Z = A S``; that is the only place the two kinds of prior differ.
    """

    #: Whether the right factor of ``C_i`` equals the covariance downdate's root (and the
    #: normalised images equal ``A`` times it): true for the inverse prior only.
    shares_factors: bool = False

    @abc.abstractmethod
    def covariance(self, A: LinearOperator) -> LinearOperator:
        """``Σ₀`` as an operator of ``A``'s shape, dtype and device."""

    @abc.abstractmethod
    def covariance_of_images(
        self, A: LinearOperator, S: torch.Tensor, Z: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """``(Σ₀ Z, A Σ₀ Z, products)`` for actions ``S`` and images ``Z = A S``, ``(n, m)``.

        ``products`` is the number of extra products with ``A`` this needed.
        """

    @abc.abstractmethod
    def sample(self, A: LinearOperator, k: int, generator: torch.Generator | None) -> torch.Tensor:
        """``k`` draws from ``N(0, Σ₀)``, shape ``(n, k)``."""

    def variance(self, A: LinearOperator, U: torch.Tensor) -> torch.Tensor:
        """``diag(Uᵀ Σ₀ U)`` for directions ``U`` of shape ``(n, m)``; shape ``(m,)``."""
        return torch.linalg.vecdot(U, self.covariance(A) @ U, dim=0)


class InversePrior(Prior):
    """The inverse prior ``Σ₀ = A⁻¹`` (BayesCG with the Krylov prior, IterGP).

    ``Σ₀ A S = S`` is known without solves, so the belief update needs exactly one
    product with ``A`` per iteration, and ``C_i`` is the usual low-rank inverse
    approximation ``S (Sᵀ A S)⁻¹ Sᵀ``. Quantities that need ``Σ₀`` itself
    (``cov`` products, prior variances, samples) run inner solves or Lanczos to working
    precision: documented as expensive, meant for study at small ``n``.
    """

    shares_factors = True

    def covariance(self, A: LinearOperator) -> LinearOperator:
        """``A⁻¹`` as an :class:`~pnsolve.beliefs.Inverse` operator (products run inner solves)."""
        return Inverse(A)

    def covariance_of_images(self, A, S, Z):
        """``(S, Z, 0)``: ``Σ₀ Z = A⁻¹ A S = S`` needs no product."""
        return S, Z, 0

    def sample(self, A, k, generator):
        """``k`` draws ``A^{-1/2} z`` by Lanczos matrix functions (expensive: for small ``n``)."""
        from ..krylov.matrix_function import matrix_function

        Z = rnd.randn((A.shape[0], k), generator=generator, dtype=A.dtype, device=A.device)
        return matrix_function(A, Z, lambda t: t.clamp_min(torch.finfo(t.dtype).tiny) ** -0.5)

    def __repr__(self) -> str:
        return "InversePrior()"


class GaussianPrior(Prior):
    """A general Gaussian prior covariance ``Σ₀``: ``σ² I`` or any SPD operator.

    Conditioning on ``Sᵀ A x = Sᵀ b`` follows the general Gaussian formula. Keeping the
    residual ``b − A x_i`` then needs ``A Σ₀ A S``: one more product with ``A`` per
    iteration than under :class:`InversePrior`.

    Parameters
    ----------
    cov
        A positive number ``σ²`` (``Σ₀ = σ² I``) or an SPD
        :class:`~pnsolve.linops.LinearOperator`.
    """

    def __init__(self, cov: float | LinearOperator = 1.0) -> None:
        if isinstance(cov, LinearOperator):
            if not cov.is_square:
                raise ValueError(f"cov must be square, got shape {cov.shape}")
        elif isinstance(cov, int | float) and not isinstance(cov, bool):
            if not cov > 0:
                raise ValueError(f"cov must be a positive number or an operator, got {cov}")
            cov = float(cov)
        else:
            raise TypeError(
                f"cov must be a positive number or a LinearOperator, got {type(cov).__name__}"
            )
        self.cov = cov

    def covariance(self, A: LinearOperator) -> LinearOperator:
        """``σ² I`` or the given SPD operator, checked against ``A``'s shape, dtype and device."""
        if isinstance(self.cov, float):
            return ScaledIdentity(A.shape[0], self.cov, dtype=A.dtype, device=A.device)
        if self.cov.shape != A.shape or self.cov.dtype != A.dtype or self.cov.device != A.device:
            raise ValueError(
                f"the prior covariance (shape {self.cov.shape}, {self.cov.dtype}, "
                f"{self.cov.device}) does not match A ({A.shape}, {A.dtype}, {A.device})"
            )
        return self.cov

    def covariance_of_images(self, A, S, Z):
        """``(Σ₀ Z, A Σ₀ Z, 1)``: one extra product with ``A``."""
        SZ = self.covariance(A) @ Z
        return SZ, A @ SZ, 1

    def sample(self, A, k, generator):
        """``k`` draws from ``N(0, Σ₀)``, shape ``(n, k)``."""
        Z = rnd.randn((A.shape[0], k), generator=generator, dtype=A.dtype, device=A.device)
        if isinstance(self.cov, float):
            return self.cov**0.5 * Z
        from ..krylov.matrix_function import matrix_function

        return matrix_function(self.covariance(A), Z, lambda t: t.clamp_min(0.0).sqrt())

    def __repr__(self) -> str:
        return f"GaussianPrior(cov={self.cov!r})"


def as_prior(prior: object) -> Prior:
    """``"inverse"`` → :class:`InversePrior`; a number or operator → :class:`GaussianPrior`."""
    if isinstance(prior, Prior):
        return prior
    if prior == "inverse":
        return InversePrior()
    if isinstance(prior, int | float) and not isinstance(prior, bool):
        if not (math.isfinite(prior) and prior > 0):
            raise ValueError(f"prior must be 'inverse', a positive number σ², ...; got {prior!r}")
        return GaussianPrior(prior)
    if isinstance(prior, LinearOperator):
        return GaussianPrior(prior)
    raise ValueError(
        f"prior must be 'inverse', a positive number σ², an SPD LinearOperator or a Prior; "
        f"got {prior!r}"
    )
