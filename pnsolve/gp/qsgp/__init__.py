"""Quadruply stochastic Gaussian processes (Evans & Nair): :class:`QSGP`.

A weight-space GP on ``m`` random Fourier features whose variational posterior
``q(w) = N(μ, C Cᵀ)`` (mean-field, chevron or full ``C``) is fit by stochastic gradients of
unbiased ELBO estimates (Gaussian likelihood) or of Theorem 3's lower bound (Bernoulli,
Poisson), each costing ``O(ñ m̃ (1 + R))`` whatever ``n`` and ``m`` (times the ``Q``
Gauss–Hermite points for Bernoulli/Poisson; ``R`` = 0 mean-field, ``rank`` chevron,
``m`` for ``"full"``, which is therefore not ``m``-independent).
"""

from .covariance import COVARIANCES, VariationalCovariance
from .model import QSGP

__all__ = ["COVARIANCES", "QSGP", "VariationalCovariance"]
