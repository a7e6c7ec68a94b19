"""The exact ELBO of the weight-space model (``O(n m R)``; the reference for the estimators)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ...likelihoods.base import Likelihood
from ...likelihoods.gaussian import Gaussian
from .covariance import VariationalCovariance
from .estimator import expected_log_lik
from .features import FeatureBlocks

__all__ = ["exact_elbo", "gauss_hermite"]


def gauss_hermite(points: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Nodes and weights of the probabilists' Gauss–Hermite rule (``E_{N(0,1)}``).

    Evans & Nair (2020) use 101 points.
    """
    nodes, weights = np.polynomial.hermite_e.hermegauss(points)
    weights = weights / weights.sum()
    return (
        torch.as_tensor(nodes, dtype=dtype, device=device),
        torch.as_tensor(weights, dtype=dtype, device=device),
    )


def exact_elbo(
    features: FeatureBlocks,
    cov: VariationalCovariance,
    mu: torch.Tensor,
    noise: torch.Tensor,
    likelihood: Likelihood,
    X: torch.Tensor,
    y: torch.Tensor,
    quadrature: tuple[torch.Tensor, torch.Tensor],
) -> torch.Tensor:
    """``E_q[log p(y | w)] − KL(q ‖ N(0, I))`` with ``q = N(μ, C Cᵀ)``, 0-d.

    Gaussian likelihood in closed form (eq. 2); others by Gauss–Hermite per point
    (eq. 5). Rows of ``Φ`` are formed in blocks, never all ``n × m`` at once.
    """
    m = cov.m
    kl2 = mu @ mu + cov.trace() - cov.log_det() - m  # 2 KL
    data = torch.zeros((), dtype=X.dtype, device=X.device)
    for sl, Phi in features.chunks(X):
        mean, var = Phi @ mu, cov.latent_var(Phi)
        if isinstance(likelihood, Gaussian):
            r = y[sl] - mean
            data = (
                data
                - 0.5 * (sl.stop - sl.start) * torch.log(2 * math.pi * noise)
                - 0.5 * ((r @ r) + var.sum()) / noise
            )
        else:
            nodes, weights = quadrature
            data = data + expected_log_lik(likelihood, y[sl], mean, var, nodes, weights).sum()
    return data - 0.5 * kl2
