"""Rank-normalised split-R̂ and bulk ESS (Vehtari et al. 2021): ArviZ or a fallback."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .mcmc_samples import MIN_CHAINS, Backend, as_samples, from_numpy, to_numpy

if TYPE_CHECKING:  # importing numpy.typing at run time would add np.typing to numpy
    from numpy.typing import ArrayLike

__all__ = ["BLOM_OFFSET", "ess", "split_rhat"]

#: Blom's (1958) offset in the normal scores ``Φ⁻¹((r − 3/8) / (S + 1/4))`` of ranks ``r``.
BLOM_OFFSET = 3.0 / 8.0


def split_rhat(samples: torch.Tensor | ArrayLike, *, backend: Backend = "auto") -> torch.Tensor:
    """Rank-normalised split-R̂ (Vehtari et al. 2021), per parameter.

    Each chain is split into halves (the middle draw of an odd length is dropped), all
    draws are replaced by the normal scores of their ranks, and R̂ is the larger of the
    classic ``√(((n−1)/n W + B/n)/W)`` on these scores (bulk) and on the scores of the
    absolute deviations from the median (tail). Vehtari et al. recommend ``< 1.01``.

    Parameters
    ----------
    samples
        Draws, shape ``(chains, draws, parameters)``, ``chains ≥ 2``, ``draws ≥ 4``.
    backend
        ``"arviz"`` (``arviz_stats.base.array_stats.rhat(..., method="rank")``),
        ``"fallback"`` (this module's implementation) or ``"auto"`` (ArviZ when
        importable).

    Returns
    -------
    torch.Tensor
        Shape ``(parameters,)``; ``NaN`` for a parameter whose draws are all equal.

    Raises
    ------
    TypeError
        For ``samples`` that do not hold real numbers.
    ValueError
        For ``samples`` not of the shape above or with NaN/Inf values, or a bad ``backend``.
    ImportError
        For ``backend="arviz"`` without arviz-stats installed.
    """
    return _per_parameter(samples, MIN_CHAINS, backend, "rhat", "rank", _rank_rhat)


def ess(samples: torch.Tensor | ArrayLike, *, backend: Backend = "auto") -> torch.Tensor:
    """Bulk effective sample size (Vehtari et al. 2021), per parameter, over all chains.

    Split chains, normal scores of the ranks (as in :func:`split_rhat`), then Geyer's
    initial monotone sequence estimator of the autocorrelation time ``τ`` from the
    chains' FFT autocovariances combined as in Stan: ``ρ_t = 1 − (W − mean_j γ_j(t))/V``
    with ``V`` the pooled variance; ``ESS = S/τ`` for ``S`` draws in all. For
    independent AR(1) chains with coefficient ``φ`` it is about
    ``S (1 − φ)/(1 + φ)``; it may exceed ``S`` for antithetic chains (capped at
    ``S log₁₀ S`` as in Stan).

    Parameters
    ----------
    samples, backend
        As in :func:`split_rhat`, except that one chain will do (``chains ≥ 1``) and
        ArviZ's estimate is ``arviz_stats.base.array_stats.ess(..., method="bulk")``.

    Returns
    -------
    torch.Tensor
        Shape ``(parameters,)``.

    Raises
    ------
    TypeError, ValueError, ImportError
        As in :func:`split_rhat`.
    """
    return _per_parameter(samples, 1, backend, "ess", "bulk", _bulk_ess)


def _per_parameter(
    samples: object,
    min_chains: int,
    backend: object,
    name: str,
    method: str,
    fallback: Callable[[torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """``arviz_stats`` ``name(..., method=method)`` or ``fallback`` on each parameter's chains."""
    x = as_samples(samples, min_chains=min_chains)
    stats = _arviz(backend)
    if stats is not None:
        with np.errstate(invalid="ignore", divide="ignore"):  # all draws equal: NaN
            out = getattr(stats, name)(to_numpy(x), chain_axis=0, draw_axis=1, method=method)
        return from_numpy(out, x)
    x64 = x.to(torch.float64)
    return torch.stack([fallback(x64[:, :, j]) for j in range(x.shape[2])]).to(x.dtype)


def _bulk_ess(y: torch.Tensor) -> torch.Tensor:
    """Bulk ESS of one parameter's chains ``y`` ``(m, n)``: split, normal scores, Geyer."""
    return _ess(_normal_scores(_split(y)))


def _arviz(backend: object) -> Any:
    """ArviZ's array interface (``arviz_stats.base.array_stats``) or ``None``."""
    if backend not in ("auto", "arviz", "fallback"):
        raise ValueError(f"backend must be 'auto', 'arviz' or 'fallback', got {backend!r}")
    if backend == "fallback":
        return None
    try:
        return importlib.import_module("arviz_stats.base").array_stats
    except ImportError as err:
        if backend == "arviz":
            raise ImportError(
                "backend='arviz' needs arviz-stats: pip install 'pnsolve[mcmc]' "
                "(or use backend='fallback')"
            ) from err
        return None


def _split(y: torch.Tensor) -> torch.Tensor:
    """``(m, n)`` chains → ``(2m, n // 2)`` halves (an odd length drops the middle draw)."""
    half = y.shape[1] // 2
    return torch.cat([y[:, :half], y[:, y.shape[1] - half :]])


def _normal_scores(y: torch.Tensor) -> torch.Tensor:
    """Blom normal scores ``Φ⁻¹((r − 3/8)/(S + 1/4))`` of average ranks ``r`` over all of ``y``."""
    flat = y.reshape(-1)
    ordered, order = torch.sort(flat)
    _, group, counts = torch.unique_consecutive(ordered, return_inverse=True, return_counts=True)
    last = torch.cumsum(counts, 0).to(y.dtype)  # 1-based rank of each tie group's last entry
    mean_rank = last - (counts.to(y.dtype) - 1.0) / 2.0  # ties share their average rank
    ranks = torch.empty_like(flat)
    ranks[order] = mean_rank[group]
    size = flat.numel()
    scores = torch.special.ndtri((ranks - BLOM_OFFSET) / (size - 2.0 * BLOM_OFFSET + 1.0))
    return scores.reshape(y.shape)


def _classic_rhat(y: torch.Tensor) -> torch.Tensor:
    """``√(((n−1)/n W + B/n)/W)`` of chains ``y`` ``(m, n)``."""
    n = y.shape[1]
    between = n * y.mean(1).var()
    within = y.var(1).mean()
    return torch.sqrt((between / within + n - 1) / n)


def _rank_rhat(y: torch.Tensor) -> torch.Tensor:
    """Rank-normalised split-R̂ of one parameter's chains ``y`` ``(m, n)``."""
    halves = _split(y)
    bulk = _classic_rhat(_normal_scores(halves))
    folded = (halves - _median(halves)).abs()
    tail = _classic_rhat(_normal_scores(folded))
    return torch.maximum(bulk, tail)


def _median(y: torch.Tensor) -> torch.Tensor:
    """Median of all of ``y``; for an even count ``(a + b)/2`` of the middle pair, as numpy.

    The same rounding as numpy matters: the folded draws ``|y − median|`` of the middle
    pair tie exactly or not, and ties change the ranks.
    """
    ordered = y.reshape(-1).sort().values
    mid = ordered.numel() // 2
    return ordered[mid] if ordered.numel() % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _autocov(y: torch.Tensor) -> torch.Tensor:
    """Biased autocovariances ``γ_j(t)``, ``t = 0 … n−1``, of each chain of ``y`` ``(m, n)``."""
    n = y.shape[1]
    centred = y - y.mean(1, keepdim=True)
    spectrum = torch.fft.rfft(centred, n=2 * n)  # zero padding: linear, not circular
    return torch.fft.irfft(spectrum.abs().square(), n=2 * n)[:, :n] / n


def _ess(y: torch.Tensor) -> torch.Tensor:
    """Effective sample size of chains ``y`` ``(m, n)`` (Geyer, combined as in Stan)."""
    m, n = y.shape
    size = float(m * n)
    if float(y.max() - y.min()) < torch.finfo(torch.float64).resolution:
        return torch.tensor(size, dtype=y.dtype, device=y.device)  # constant: as ArviZ
    acov = _autocov(y).mean(0)  # mean over chains, per lag
    within = acov[0] * n / (n - 1.0)
    pooled = within * (n - 1.0) / n + (y.mean(1).var() if m > 1 else 0.0)
    rho = 1.0 - (within - acov) / pooled
    rho[0] = 1.0
    # Pairs Γ_k = ρ_2k + ρ_2k+1 for k = 0 … K (lags up to n − 2); the sum stops before the
    # first non-positive pair J (Geyer's initial positive sequence), whose even lag still
    # counts once if positive; the pairs before J are made non-increasing (monotone).
    last = max((n - 3) // 2, 0)
    pairs = rho[0 : 2 * last + 1 : 2] + rho[1 : 2 * last + 2 : 2]
    nonpositive = (pairs[1:] <= 0).nonzero()
    J = int(nonpositive[0, 0]) + 1 if len(nonpositive) else last
    if bool(pairs[0] <= 0):
        J = 0
    even = rho[2 * J]  # ρ_0 = 1 when J = 0
    tail = even if (J > 0 and bool(pairs[J] >= 0)) or bool(even > 0) else even.new_zeros(())
    monotone = torch.cummin(pairs[:J], 0).values if J > 0 else pairs[:0]
    tau = -1.0 + 2.0 * monotone.sum() + tail
    tau = torch.clamp(tau, min=1.0 / math.log10(size))
    return size / tau
