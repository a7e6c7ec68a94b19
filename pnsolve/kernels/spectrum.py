"""The empirical spectrum of data: Lomb–Scargle periodogram and a Gaussian-mixture fit."""

from __future__ import annotations

import math

import torch

__all__ = ["empirical_spectral_mixture", "lomb_scargle"]

#: Points of a column used for its periodogram (evenly spaced in sorted order beyond it).
MAX_POINTS = 4000
#: False-alarm level (over all frequencies) of the periodogram's significance threshold.
FALSE_ALARM = 0.01
#: EM iterations of the mixture fit.
EM_STEPS = 200


def lomb_scargle(t: torch.Tensor, y: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """Lomb–Scargle power of ``y`` sampled at ``t`` (both ``(n,)``) at ``freqs`` ``(F,)``.

    ``P(f) = ½ [(Σ y cos ω(t−τ))² / Σ cos² ω(t−τ) + (Σ y sin ω(t−τ))² / Σ sin² ω(t−τ)]``
    with ``ω = 2πf`` and ``tan 2ωτ = Σ sin 2ωt / Σ cos 2ωt`` (Lomb 1976, Scargle 1982):
    the least-squares sinusoid fit at each frequency, for irregular samples. Works on
    frequency chunks (memory ``O(n · 256)``).
    """
    out = torch.empty_like(freqs)
    y = y - y.mean()
    for f0 in range(0, freqs.shape[0], 256):
        w = 2.0 * math.pi * freqs[f0 : f0 + 256]
        wt = t.unsqueeze(1) * w.unsqueeze(0)  # (n, F)
        tau = 0.5 * torch.atan2(torch.sin(2 * wt).sum(0), torch.cos(2 * wt).sum(0))
        arg = wt - tau.unsqueeze(0)
        c, s = torch.cos(arg), torch.sin(arg)
        cc = (c * c).sum(0).clamp_min(1e-300)
        ss = (s * s).sum(0).clamp_min(1e-300)
        out[f0 : f0 + 256] = 0.5 * ((y @ c) ** 2 / cc + (y @ s) ** 2 / ss)
    return out


def _mixture_1d(
    f: torch.Tensor, p: torch.Tensor, Q: int, floor: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Weighted EM for a ``Q``-component Gaussian mixture on points ``f`` with weights ``p``.

    Starts at the ``Q`` highest local maxima of ``p`` (then at weighted quantiles, if
    there are fewer peaks) with variance ``(4 floor)``; variances floored at ``floor``.
    Returns ``(proportions, means, variances)``, each ``(Q,)``.
    """
    inner = (p[1:-1] > p[:-2]) & (p[1:-1] >= p[2:])
    peaks = torch.nonzero(inner).squeeze(1) + 1
    peaks = peaks[torch.argsort(p[peaks], descending=True)][:Q]
    cdf = torch.cumsum(p, 0)
    levels = (torch.arange(Q - peaks.numel(), dtype=f.dtype, device=f.device) + 0.5) / max(
        1, Q - peaks.numel()
    )
    extra = torch.searchsorted(cdf, levels).clamp_max(f.shape[0] - 1)
    mu = f[torch.cat([peaks, extra])].clone()
    var = torch.full((Q,), 4.0 * floor, dtype=f.dtype, device=f.device)
    pi = torch.full((Q,), 1.0 / Q, dtype=f.dtype, device=f.device)
    for _ in range(EM_STEPS):
        logr = (
            torch.log(pi) - 0.5 * torch.log(2 * math.pi * var) - 0.5 * (f[:, None] - mu) ** 2 / var
        )
        r = torch.softmax(logr, dim=1) * p[:, None]
        nq = r.sum(0).clamp_min(1e-300)
        mu = (r * f[:, None]).sum(0) / nq
        var = (r * (f[:, None] - mu) ** 2).sum(0) / nq + floor
        pi = (nq / nq.sum()).clamp_min(1e-12)
    return pi, mu.abs().clamp_min(math.sqrt(floor)), var


def empirical_spectral_mixture(
    X: torch.Tensor, y: torch.Tensor, Q: int, *, num_frequencies: int = 2000
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Spectral-mixture parameters ``(w (Q,), μ (Q, d), v (Q, d))`` from data.

    Per column of ``X`` ``(n, d)`` (float64, CPU): the Lomb–Scargle periodogram of ``y``
    on ``num_frequencies`` frequencies up to the Nyquist frequency of the median spacing
    of the sorted distinct inputs, restricted to its significant frequencies (against
    white noise at :data:`FALSE_ALARM`), normalised to a density, and a ``Q``-component
    Gaussian mixture fitted to it (:func:`_mixture_1d`). Components are paired across
    columns by decreasing proportion; ``w`` is ``var(y)`` times the mean proportions.
    """
    n, d = X.shape
    if num_frequencies < Q:
        raise ValueError(
            f"num_frequencies must be at least num_mixtures={Q}, got {num_frequencies}"
        )
    var_y = float(y.var()) if n > 1 else 1.0
    var_y = var_y if var_y > 0 else 1.0
    props, means, variances = [], [], []
    for j in range(d):
        order = torch.argsort(X[:, j])
        if n > MAX_POINTS:
            picks = torch.linspace(0, n - 1, MAX_POINTS, device=X.device).round().long()
            order = order[picks]
        t, yj = X[order, j], y[order]
        gaps = torch.diff(torch.unique(t))
        spacing = float(gaps.median()) if gaps.numel() else 1.0
        f_max = 0.5 / spacing
        freqs = torch.linspace(
            f_max / num_frequencies, f_max, num_frequencies, dtype=X.dtype, device=X.device
        )
        power = lomb_scargle(t, yj, freqs)
        # keep the significant frequencies: under white noise the power divided by the
        # variance is Exp(1) at each frequency, so a false-alarm level FALSE_ALARM over
        # all frequencies puts the threshold at log(F / FALSE_ALARM); the rest is noise,
        # which belongs to the likelihood, not to the kernel
        threshold = float(yj.var()) * math.log(num_frequencies / FALSE_ALARM)
        significant = power > threshold
        if bool(significant.any()):
            power = torch.where(significant, power, torch.zeros_like(power))
        total = float(power.sum())
        density = power / total if total > 0 else torch.full_like(power, 1.0 / power.numel())
        step = float(freqs[1] - freqs[0]) if num_frequencies > 1 else f_max
        pi, mu, v = _mixture_1d(freqs, density, Q, floor=step**2)
        order_q = torch.argsort(pi, descending=True)
        props.append(pi[order_q])
        means.append(mu[order_q])
        variances.append(v[order_q])
    w = var_y * torch.stack(props, 1).mean(1)
    return w, torch.stack(means, 1), torch.stack(variances, 1)
