"""Synthetic Poisson count regression (Tatzel et al. 2024, IterNCGP, §5.1 and App. C.2)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.validation import check_positive_int
from .dataset import check_float_dtype
from .kernel_formulas import stationary_kernel
from .sampling import optional_generator, output_cast, require_generator, sample_gp_prior

__all__ = ["PoissonCounts", "poisson_counts"]


@dataclass(frozen=True, eq=False)
class PoissonCounts:
    """Count data with its latent log rate.

    Attributes
    ----------
    X
        Inputs of shape ``(n, 1)``, linearly spaced.
    y
        Counts of shape ``(n,)``: non-negative integers stored in ``dtype``.
    f
        Latent log rate of shape ``(n,)``, a GP prior draw.
    rate
        Poisson rate ``exp(f)`` of shape ``(n,)``.
    """

    X: torch.Tensor
    y: torch.Tensor
    f: torch.Tensor
    rate: torch.Tensor


def poisson_counts(
    n: int = 1000,
    *,
    generator: torch.Generator,
    count_generator: torch.Generator | None = None,
    low: float = 0.0,
    high: float = 1.0,
    lengthscale: float = 0.1,
    outputscale: float = 5.0,
    jitter: float = 1e-8,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> PoissonCounts:
    """Count data from a Poisson likelihood whose log rate is a GP draw.

    The setup of the paper's Poisson regression experiment (App. C.2):

    1. ``X``: ``n`` points linearly spaced in ``[low, high]``;
    2. log rate ``f ~ GP(0, k)`` at ``X`` with the RBF kernel of lengthscale 0.1 and
       outputscale 5.0 (GPyTorch convention ``5 · exp(−r²/2)``); drawn exactly with a
       Cholesky factor of ``K + τ I``;
    3. rate ``λ = exp(f)``;
    4. counts ``y_i ~ Poisson(λ_i)``.

    The paper re-draws the counts with the *same* rates for repeated runs: pass a
    separate ``count_generator`` to vary the counts while ``generator`` fixes ``f``.
    The number of points and the interval are not legible in our text copy of the
    paper; ``n = 1000`` on ``[0, 1]`` are our defaults (a lengthscale of 0.1 gives a
    log rate with about ten bumps there).

    Parameters
    ----------
    n
        Number of points (≥ 1).
    generator
        Required ``torch.Generator`` for the latent log rate (and for the counts
        when ``count_generator`` is None).
    count_generator
        Optional separate generator for the Poisson counts.
    low, high
        Interval of the inputs.
    lengthscale, outputscale
        RBF hyperparameters of the log-rate prior.
    jitter
        Relative Cholesky jitter.
    dtype, device
        Dtype and device of the results.

    Returns
    -------
    PoissonCounts
        ``X (n, 1)``, ``y (n,)``, ``f (n,)``, ``rate (n,)``.
    """
    generator = require_generator(generator)
    count_generator = optional_generator(count_generator, "count_generator", default=generator)
    dtype = check_float_dtype(dtype)
    check_positive_int(n, "n")
    if not high > low:
        raise ValueError(f"high must exceed low, got low={low}, high={high}")
    X = torch.linspace(low, high, n, dtype=torch.float64, device=generator.device)[:, None]
    K = stationary_kernel(X, X, kind="rbf", lengthscale=lengthscale, outputscale=outputscale)
    f = sample_gp_prior(K, generator=generator, jitter=jitter)
    rate = torch.exp(f)
    y = torch.poisson(rate.to(count_generator.device), generator=count_generator)

    cast = output_cast(dtype, device)
    return PoissonCounts(X=cast(X), y=cast(y), f=cast(f), rate=cast(rate))
