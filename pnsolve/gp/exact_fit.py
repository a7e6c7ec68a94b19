"""Type-II maximum likelihood for exact GPs (Cholesky + autograd): the reference fit."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..kernels.base import StationaryKernel, inv_softplus, softplus
from ._checks import (
    check_inputs,
    check_model_kernel,
    check_noise,
    check_nonnegative_number,
    check_positive_int,
    check_positive_number,
    check_targets,
)
from .exact import ExactGP

__all__ = ["ExactFit", "fit_exact_hyperparameters"]


@dataclass(frozen=True)
class ExactFit:
    """Result of :func:`fit_exact_hyperparameters`.

    Attributes
    ----------
    kernel
        The kernel passed in, with its fitted hyperparameters.
    noise
        Fitted noise variance ``σ²``.
    log_marginal_likelihood
        ``log p(y | X)`` after each step, length ``steps``.
    """

    kernel: StationaryKernel
    noise: float
    log_marginal_likelihood: list[float]


def fit_exact_hyperparameters(
    kernel: StationaryKernel,
    X: torch.Tensor,
    y: torch.Tensor,
    noise: float = 0.1,
    *,
    steps: int = 100,
    lr: float = 0.05,
    min_noise: float = 1e-6,
) -> ExactFit:
    """Maximise the exact log marginal likelihood over the kernel's parameters and ``σ²``.

    Adam on the softplus-parametrised hyperparameters (those of ``kernel``, updated in
    place, and the noise), each step one ``O(n³)`` Cholesky with autograd: meant for
    ``n`` up to a few thousand (fit on a subset for larger data).

    Parameters
    ----------
    kernel
        Kernel whose parameters are fitted in place.
    X, y
        Training inputs ``(n, d)`` and targets ``(n,)``.
    noise
        Initial noise variance.
    steps
        Adam steps.
    lr
        Adam learning rate (on the raw, softplus-inverse parameters).
    min_noise
        Lower bound added to the softplus noise (keeps ``K̂`` well-posed).

    Returns
    -------
    ExactFit
        The kernel, the fitted noise and the log marginal likelihood per step.
    """
    check_model_kernel(kernel)
    X = check_inputs(X, "X")
    y = check_targets(y, X)
    noise = float(check_noise(noise))
    check_positive_int(steps, "steps")
    check_positive_number(lr, "lr")
    check_nonnegative_number(min_noise, "min_noise")
    raw_noise = nn.Parameter(
        inv_softplus(torch.tensor(max(noise - min_noise, 1e-12), dtype=X.dtype, device=X.device))
    )
    params = [*kernel.parameters(), raw_noise]
    opt = torch.optim.Adam(params, lr=lr)
    gp = ExactGP(kernel, noise=noise, mean=0.0)
    trace = []
    with torch.enable_grad():
        for _ in range(steps):
            opt.zero_grad()
            sigma2 = softplus(raw_noise) + min_noise
            lml = gp.log_marginal_likelihood(X, y, noise=sigma2)
            (-lml / X.shape[0]).backward()
            opt.step()
            trace.append(float(lml.detach()))
    fitted = float(softplus(raw_noise.detach()) + min_noise)
    return ExactFit(kernel=kernel, noise=fitted, log_marginal_likelihood=trace)
