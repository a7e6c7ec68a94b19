"""Exact log marginal likelihood and its gradient in log space (Cholesky; small ``n``)."""

from __future__ import annotations

import math

import torch

from ..._core.precision import full_float32
from .hyperparameters import LogHyperparameters

__all__ = ["exact_log_marginal"]


@full_float32
def exact_log_marginal(
    params: LogHyperparameters,
    X: torch.Tensor,
    y: torch.Tensor,
    theta: torch.Tensor,
    *,
    grad: bool = False,
) -> tuple[float, torch.Tensor | None]:
    """``log p(y | X, θ)`` by Cholesky, and optionally its gradient in ``θ``.

    Eq. 4 of Filippone & Engler (2015):
    ``log p = −½ yᵀ K̂⁻¹ y − ½ log |K̂| − (n/2) log 2π`` with ``K̂ = K(θ) + λ I``. Dense:
    ``O(n³)`` time, ``O(n²)`` memory — the reference for the stochastic gradients, the
    Metropolis–Hastings sampler and the MAP on a subset.

    Parameters
    ----------
    params
        The model's :class:`LogHyperparameters`.
    X, y
        Inputs ``(n, d)`` and targets ``(n,)``, float64 recommended.
    theta
        Log-hyperparameters, shape ``(p,)``.
    grad
        Also return ``∇_θ log p``, shape ``(p,)`` (autograd through the Cholesky factor).

    Returns
    -------
    value : float
        ``log p(y | X, θ)``; ``-inf`` if ``K̂`` is not numerically positive definite.
    gradient : torch.Tensor or None
        ``(p,)`` float64, or ``None`` without ``grad`` (or at ``-inf``).
    """
    theta = params.check(theta)
    kernel = params.kernel_at(theta)
    n = X.shape[0]
    with torch.enable_grad() if grad else torch.no_grad():
        log_noise = theta[-1].clone().requires_grad_(grad)
        K = kernel(X) + torch.exp(log_noise).to(X.dtype) * torch.eye(
            n, dtype=X.dtype, device=X.device
        )
        L, info = torch.linalg.cholesky_ex(K)
        if int(info) != 0:
            return -math.inf, None
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
        value = (
            -0.5 * (y * alpha).sum()
            - torch.log(L.diagonal()).sum()
            - 0.5 * n * math.log(2 * math.pi)
        )
        if not grad:
            return float(value), None
        value.backward()
    assert log_noise.grad is not None
    noise_grad = float(log_noise.grad) / params.noise_at(theta)
    return float(value.detach()), params.chain_rule(theta, noise_grad)
