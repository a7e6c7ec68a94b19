"""Regression data drawn from a Gaussian-process prior."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .._core.validation import check_positive_int
from .dataset import check_float_dtype
from .kernel_formulas import stationary_kernel
from .sampling import output_cast, require_generator, sample_gp_prior, standard_normal, uniform

__all__ = ["GPDraws", "gp_draws"]


@dataclass(frozen=True, eq=False)
class GPDraws:
    """Inputs, noisy targets and the latent function values of one GP draw.

    Attributes
    ----------
    X
        Inputs of shape ``(n, d)``.
    y
        Targets ``f + ε`` of shape ``(n,)``, ``ε ~ N(0, noise · I)``.
    f
        Latent function values of shape ``(n,)``.
    """

    X: torch.Tensor
    y: torch.Tensor
    f: torch.Tensor


def gp_draws(
    n: int,
    d: int = 1,
    kernel: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    noise: float = 0.01,
    *,
    generator: torch.Generator,
    low: float = 0.0,
    high: float = 1.0,
    jitter: float = 1e-8,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> GPDraws:
    """Sample ``X ~ U[low, high]^d``, ``f ~ GP(0, k)`` at ``X`` and ``y = f + ε``.

    ``f`` is drawn exactly: ``f = L z`` with ``L`` the Cholesky factor of
    ``k(X, X) + τ I`` (``τ = jitter · mean diag``, increased tenfold while the
    factorisation fails). All sampling happens in float64 on the generator's
    device; the results are then cast to ``dtype`` and moved to ``device`` (default:
    torch's default device).

    Parameters
    ----------
    n, d
        Number of points and input dimension (both ≥ 1).
    kernel
        Any callable ``(X1 (n1, d), X2 (n2, d)) -> (n1, n2)`` tensor, e.g.
        ``pnsolve.kernels.RBF(...)``; it is called on float64 inputs. Default: RBF with
        lengthscale 0.5 and outputscale 1 (written out locally).
    noise
        Observation-noise *variance* ``σ² ≥ 0``.
    generator
        Required ``torch.Generator``; the same seed gives the same draw.
    low, high
        Bounds of the uniform input domain.
    jitter
        Relative jitter of the Cholesky factorisation.
    dtype, device
        Dtype and device of the results.

    Returns
    -------
    GPDraws
        ``X (n, d)``, ``y (n,)``, ``f (n,)``.
    """
    generator = require_generator(generator)
    dtype = check_float_dtype(dtype)
    check_positive_int(n, "n")
    check_positive_int(d, "d")
    if not noise >= 0:
        raise ValueError(f"noise must be a non-negative variance, got {noise}")
    if not high > low:
        raise ValueError(f"high must exceed low, got low={low}, high={high}")
    if kernel is not None and not callable(kernel):
        raise TypeError(f"kernel must be a callable (X1, X2) -> tensor, got {kernel!r}")
    X = uniform(n, d, low=low, high=high, generator=generator)
    if kernel is None:
        K = stationary_kernel(X, X, kind="rbf", lengthscale=0.5)
    else:
        K = torch.as_tensor(kernel(X, X), dtype=torch.float64, device=X.device)
        if K.shape != (n, n):
            raise ValueError(f"kernel(X, X) must have shape ({n}, {n}), got {tuple(K.shape)}")
    f = sample_gp_prior(K, generator=generator, jitter=jitter)
    y = f + noise**0.5 * standard_normal(n, generator=generator)

    cast = output_cast(dtype, device)
    return GPDraws(X=cast(X), y=cast(y), f=cast(f))
