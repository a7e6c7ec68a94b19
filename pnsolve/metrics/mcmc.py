"""MCMC diagnostics: Gelman–Rubin PSRF, rank-normalised split-R̂, bulk ESS, summaries.

Samples are arrays of shape ``(chains, draws, parameters)`` (torch tensors or anything
``numpy.asarray`` accepts), as the samplers and ``pnsolve sample`` write them.

* :func:`gelman_rubin` — the potential scale reduction factor of Gelman & Rubin (1992)
  with the degrees-of-freedom correction and the upper confidence limit of Brooks &
  Gelman (1998), as R coda's ``gelman.diag`` reports it ("Point est.", "Upper C.I.") and
  as Filippone & Engler (2015), Fig. 5 ("PSRF median / PSRF 97.5%"), plot it;
  :func:`psrf_curve` evaluates it on growing prefixes of the chains.
* :func:`split_rhat` and :func:`ess` — rank-normalised split-R̂ and bulk effective
  sample size of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021). They call ArviZ
  (``arviz_stats.base.array_stats.rhat(..., method="rank")`` and
  ``.ess(..., method="bulk")``; install with ``pip install 'pnsolve[mcmc]'``) when it is
  importable, and otherwise a small implementation of the same formulas in torch
  (``backend="fallback"``) that agrees with ArviZ to rounding.
* :func:`mcmc_summary` — per-parameter mean, sd, PSRF, split-R̂ and ESS.

All quantities are computed in float64 and returned in the dtype (float32 or float64)
and on the device of the samples; integer samples give the default dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .mcmc_rank import ess, split_rhat
from .mcmc_samples import MIN_CHAINS, MIN_DRAWS, Backend, as_samples

if TYPE_CHECKING:  # importing numpy.typing at run time would add np.typing to numpy
    from numpy.typing import ArrayLike

__all__ = [
    "PSRF_THRESHOLD",
    "ParameterSummary",
    "ess",
    "gelman_rubin",
    "mcmc_summary",
    "psrf_curve",
    "split_rhat",
]

#: Customary convergence threshold for the PSRF (Gelman et al.; Filippone & Engler 2015's target).
PSRF_THRESHOLD = 1.1
#: Confidence of the PSRF's upper limit (coda's default: the 97.5 % quantile).
DEFAULT_CONFIDENCE = 0.95

_F64 = torch.float64


@dataclass(frozen=True)
class ParameterSummary:
    """One parameter's row of :func:`mcmc_summary`.

    Attributes
    ----------
    name
        The parameter's entry of ``names`` (default ``θ0, θ1, …`` by position).
    mean, sd
        Posterior mean and standard deviation over all chains and draws.
    psrf, psrf_upper
        Gelman–Rubin PSRF and its upper confidence limit (:func:`gelman_rubin`);
        ``NaN`` with a single chain.
    split_rhat
        Rank-normalised split-R̂ (:func:`split_rhat`); ``NaN`` with a single chain.
    ess
        Bulk effective sample size over all chains (:func:`ess`).
    """

    name: str
    mean: float
    sd: float
    psrf: float
    psrf_upper: float
    split_rhat: float
    ess: float


# ------------------------------------------------------------------------ Gelman–Rubin


def gelman_rubin(
    samples: torch.Tensor | ArrayLike, *, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[torch.Tensor, torch.Tensor]:
    """Potential scale reduction factor (PSRF) and its upper confidence limit.

    With ``m`` chains of ``n`` draws, chain means ``x̄_j`` and variances ``s_j²``:
    ``W = mean(s_j²)``, ``B = n var(x̄_j)``, the pooled variance
    ``V = (n−1)/n W + (1 + 1/m) B/n`` and ``R² = V/W``. ``V``'s sampling variance (from
    ``var(s_j²)``, ``B`` and ``cov(s_j², x̄_j)``, ``cov(s_j², x̄_j²)``) gives its degrees
    of freedom ``d = 2V²/var(V)``; the PSRF is ``√((d+3)/(d+1) · R²)`` (Brooks & Gelman
    1998). The upper limit replaces the between-chain part ``(1 + 1/m) B/(nW)`` by its
    ``(1 + confidence)/2`` quantile, taking ``B/W`` as F-distributed with ``m − 1`` and
    ``2W²/var(W)`` degrees of freedom. This is R coda's ``gelman.diag`` on the samples as
    given (``autoburnin = FALSE``: discard burn-in before calling).

    Values near 1 say the chains agree; Filippone & Engler (2015) ask for ``< 1.1``
    (:data:`PSRF_THRESHOLD`). Identical chains give ``√((n−1)/n)``.

    Parameters
    ----------
    samples
        Draws, shape ``(chains, draws, parameters)``, ``chains ≥ 2``, ``draws ≥ 4``,
        finite.
    confidence
        Level of the upper limit, in ``(0, 1)``; ``0.95`` gives coda's 97.5 % quantile.

    Returns
    -------
    psrf : torch.Tensor
        Point estimate, shape ``(parameters,)``.
    upper : torch.Tensor
        Upper confidence limit, shape ``(parameters,)``.

    Notes
    -----
    Degenerate cases: a parameter constant within every chain has ``W = 0`` and gets
    ``inf`` (chains stuck at different values) or ``NaN`` (all draws equal); a negative
    estimate of ``var(V)`` (its terms are estimated separately) is taken as 0, i.e.
    ``d = ∞``, where coda would report a meaningless negative ``d``.

    Raises
    ------
    ValueError
        If ``samples`` has the wrong shape, too few chains or draws, or NaN/Inf values,
        or ``confidence`` is not in ``(0, 1)``.
    """
    x = as_samples(samples, min_chains=MIN_CHAINS)
    level = _check_confidence(confidence)
    psrf, upper = _psrf(x.to(_F64), level)
    return psrf.to(x.dtype), upper.to(x.dtype)


def psrf_curve(
    samples: torch.Tensor | ArrayLike,
    steps: Sequence[int],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PSRF and its upper limit on the first ``k`` draws of every chain, for each ``k``.

    The convergence curve of Filippone & Engler (2015), Fig. 5 (right):
    :func:`gelman_rubin` on growing prefixes of the chains.

    Parameters
    ----------
    samples
        Draws, shape ``(chains, draws, parameters)``, ``chains ≥ 2``, ``draws ≥ 4``.
    steps
        Prefix lengths ``k``, integers with ``4 ≤ k ≤ draws`` (e.g. evenly spaced).
    confidence
        Level of the upper limit (see :func:`gelman_rubin`).

    Returns
    -------
    psrf : torch.Tensor
        Point estimates, shape ``(len(steps), parameters)``.
    upper : torch.Tensor
        Upper confidence limits, shape ``(len(steps), parameters)``.

    Raises
    ------
    ValueError
        For bad ``samples`` (see :func:`gelman_rubin`) or a ``k`` outside
        ``[4, draws]``; ``TypeError`` for non-integer ``steps``.
    """
    x = as_samples(samples, min_chains=MIN_CHAINS)
    level = _check_confidence(confidence)
    ks = _check_steps(steps, x.shape[1])
    x64 = x.to(_F64)
    pairs = [_psrf(x64[:, :k], level) for k in ks]
    psrf = torch.stack([p for p, _ in pairs])
    upper = torch.stack([u for _, u in pairs])
    return psrf.to(x.dtype), upper.to(x.dtype)


def _psrf(x: torch.Tensor, level: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Point estimate and upper limit of the PSRF of float64 ``x`` ``(m, n, p)``."""
    m, n = x.shape[0], x.shape[1]
    xbar = x.mean(1)  # (m, p)
    s2 = x.var(1)  # (m, p), unbiased
    w = s2.mean(0)
    b = n * xbar.var(0)
    mu = xbar.mean(0)
    var_w = s2.var(0) / m
    var_b = 2.0 * b.square() / (m - 1)
    cov_wb = (n / m) * (_cov(s2, xbar.square()) - 2.0 * mu * _cov(s2, xbar))
    scale = 1.0 + 1.0 / m
    V = (n - 1) / n * w + scale * b / n
    var_V = ((n - 1) ** 2 * var_w + scale**2 * var_b + 2.0 * (n - 1) * scale * cov_wb) / n**2
    df_V = 2.0 * V.square() / var_V.clamp_min(0.0)  # inf when var(V) = 0
    df_adj = 1.0 + 2.0 / (df_V + 1.0)  # (d + 3)/(d + 1), → 1 as d → ∞
    df_W = 2.0 * w.square() / var_w  # inf when the chains' variances agree exactly
    r2_fixed = (n - 1) / n
    r2_random = scale * b / (n * w)
    quantile = _f_quantile((1.0 + level) / 2.0, m - 1, df_W)
    psrf = torch.sqrt(df_adj * (r2_fixed + r2_random))
    upper = torch.sqrt(df_adj * (r2_fixed + quantile * r2_random))
    stuck = torch.where(b > 0, math.inf, math.nan).to(x)  # W = 0: constant chains
    return torch.where(w > 0, psrf, stuck), torch.where(w > 0, upper, stuck)


def _cov(a: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Covariance over chains (axis 0, divisor ``m − 1``) of matching columns."""
    return ((a - a.mean(0)) * (c - c.mean(0))).sum(0) / (a.shape[0] - 1)


def _f_quantile(q: float, dfn: int, dfd: torch.Tensor) -> torch.Tensor:
    """Quantile ``q`` of F(``dfn``, ``dfd``) per entry; ``dfd = ∞`` gives ``χ²_dfn / dfn``."""
    from scipy.stats import chi2, f

    d = dfd.detach().cpu().numpy()  # host round trip: scipy's F and χ² quantiles
    finite = np.isfinite(d) & (d > 0)
    out = np.where(finite, f.ppf(q, dfn, np.where(finite, d, 1.0)), chi2.ppf(q, dfn) / dfn)
    out = np.where(np.isnan(d), np.nan, out)
    return torch.as_tensor(out, dtype=dfd.dtype, device=dfd.device)


# --------------------------------------------------------------------------- summary


def mcmc_summary(
    samples: torch.Tensor | ArrayLike,
    names: Sequence[str] | None = None,
    *,
    backend: Backend = "auto",
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[ParameterSummary]:
    """Per-parameter posterior mean, sd, PSRF (with upper limit), split-R̂ and bulk ESS.

    Parameters
    ----------
    samples
        Draws, shape ``(chains, draws, parameters)``, ``draws ≥ 4``. With a single chain
        the between-chain diagnostics (PSRF, split-R̂) are ``NaN``.
    names
        One name per parameter; default ``θ0, θ1, …``.
    backend
        For :func:`split_rhat` and :func:`ess`.
    confidence
        Level of the PSRF's upper limit (:func:`gelman_rubin`).

    Returns
    -------
    list of ParameterSummary
        One row per parameter, in order.

    Raises
    ------
    ValueError
        For bad ``samples``, ``backend`` or ``confidence``, or ``names`` of the wrong
        length.
    """
    x = as_samples(samples, min_chains=1)
    chains, _, p = x.shape
    labels = [f"θ{j}" for j in range(p)] if names is None else [str(s) for s in names]
    if isinstance(names, str) or len(labels) != p:
        raise ValueError(f"names must hold one name per parameter ({p}), got {names!r}")
    pooled = x.to(_F64).reshape(-1, p)
    mean, sd = pooled.mean(0), pooled.std(0)
    effective = ess(x, backend=backend)
    if chains >= MIN_CHAINS:
        psrf, upper = gelman_rubin(x, confidence=confidence)
        rhat = split_rhat(x, backend=backend)
    else:
        _check_confidence(confidence)
        psrf = upper = rhat = x.new_full((p,), math.nan)
    return [
        ParameterSummary(
            name=labels[j],
            mean=float(mean[j]),
            sd=float(sd[j]),
            psrf=float(psrf[j]),
            psrf_upper=float(upper[j]),
            split_rhat=float(rhat[j]),
            ess=float(effective[j]),
        )
        for j in range(p)
    ]


# ------------------------------------------------------------------------ validation


def _check_confidence(confidence: object) -> float:
    if not (isinstance(confidence, int | float) and 0.0 < float(confidence) < 1.0):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    return float(confidence)


def _check_steps(steps: Sequence[int], draws: int) -> list[int]:
    ks = steps.tolist() if isinstance(steps, torch.Tensor | np.ndarray) else list(steps)
    if not ks:
        raise ValueError("steps must hold at least one prefix length")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int | np.integer):
            raise TypeError(f"steps must hold integers, got {k!r}")
        if not MIN_DRAWS <= k <= draws:
            raise ValueError(f"steps must lie in [{MIN_DRAWS}, draws = {draws}], got {k}")
    return [int(k) for k in ks]
