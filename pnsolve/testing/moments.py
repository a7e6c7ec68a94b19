"""z-scores of sample moments against a known Gaussian (for statistical tests)."""

from __future__ import annotations

import torch

from .tolerances import statistical_threshold

__all__ = ["moment_threshold", "moment_z_scores"]


def moment_z_scores(F: torch.Tensor, mean: torch.Tensor, cov: torch.Tensor) -> tuple[float, float]:
    """Largest ``|z|`` of the sample mean and of the known-mean sample covariance entries.

    Mean: ``z_i = (F̄_i − m_i) / √(C_ii / s)``. Covariance:
    ``Ŝ = (1/s) Σ (F − m)(F − m)ᵀ`` is unbiased for ``C`` with
    ``Var Ŝ_ij = (C_ii C_jj + C_ij²) / s`` (Isserlis); with ``s`` in the thousands the
    average of ``s`` i.i.d. products is close to normal (CLT), so ``z_ij`` is a z-score.
    Compare against :func:`~pnsolve.testing.statistical_threshold` with a Bonferroni
    correction over ``t + t(t+1)/2`` scores.

    Parameters
    ----------
    F
        Samples, shape ``(t, s)``.
    mean
        Distribution mean, shape ``(t,)``.
    cov
        Distribution covariance, shape ``(t, t)``, positive diagonal.

    Returns
    -------
    tuple of float
        ``(max |z| over the means, max |z| over the upper-triangular covariance entries)``.
    """
    s = F.shape[1]
    zm = (F.mean(1) - mean) / torch.sqrt(cov.diagonal() / s)
    R = F - mean[:, None]
    S = R @ R.mT / s
    d = cov.diagonal()
    zc = (S - cov) / torch.sqrt((d[:, None] * d[None, :] + cov**2) / s)
    iu = torch.triu_indices(*cov.shape)
    return float(zm.abs().max()), float(zc[iu[0], iu[1]].abs().max())


def moment_threshold(t: int, false_alarm: float) -> float:
    """The ``|z|`` threshold for :func:`moment_z_scores` of ``t`` variables.

    Bonferroni over the ``t`` mean and ``t(t+1)/2`` covariance scores, so that the whole
    test fails with probability about ``false_alarm`` when the samples are right.
    """
    return statistical_threshold(false_alarm / (t + t * (t + 1) // 2))
