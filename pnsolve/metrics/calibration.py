"""Calibration of GP posteriors' uncertainty on draws from the GP prior.

A belief is only worth its calibration. On data drawn from the model itself,
``f ~ GP(0, k)`` and ``y = f(X) + ε``, a calibrated posterior's standardised errors

* **computational** — ``z = (μ_i(x) − μ*(x)) / √comp_var(x)``, the error of the
  computed mean against the exact GP mean ``μ*`` over the uncertainty the computation
  reports (``comp_var = var − math_var``), and
* **combined** — ``z = (μ_i(x) − f(x)) / √var(x)``, the error against the latent
  function over the total (mathematical + computational) variance,

are standard normal: ``E[z²] = 1`` and the central ``α`` interval ``|z| ≤ Φ⁻¹((1+α)/2)``
covers a fraction ``α``. :func:`prior_draw_calibration` estimates both, averaging over
the test points of one draw first and then over draws, so the standard errors come from
the spread of the per-draw means (test points of one draw are correlated).

The solver-level statistic (the whitened error ``eᵀ Σ_i⁺ e ~ χ²(rank)`` of a solution
belief) is :func:`pnsolve.testing.calibration.whitened_error_statistics`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .._core import random as rnd
from .._core.inputs import check_inputs
from .._core.validation import (
    check_finite,
    check_positive_int,
    check_positive_number,
    require_generator,
)
from ..kernels.base import StationaryKernel

__all__ = ["CalibrationStatistics", "prior_draw_calibration", "z_statistics"]

#: Nominal levels of the default coverage curve.
DEFAULT_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)


@dataclass(frozen=True)
class CalibrationStatistics:
    """Mean ``z²`` and coverage of standardised errors, with standard errors over draws.

    Attributes
    ----------
    mean_z2, mean_z2_se
        ``E[z²]`` (1 when calibrated; above 1: over-confident, below: too wide) and its
        standard error from the per-draw means.
    levels
        Nominal coverage levels ``α``, shape ``(L,)``.
    coverage, coverage_se
        Fraction of points with ``|z| ≤ Φ⁻¹((1 + α)/2)`` per level and its standard
        error, shape ``(L,)`` each (``α`` when calibrated).
    draws
        Number of prior draws averaged (those with at least one point not excluded).
    excluded
        Points left out because their variance was at rounding level (no uncertainty
        left to calibrate), over all draws.
    """

    mean_z2: float
    mean_z2_se: float
    levels: torch.Tensor
    coverage: torch.Tensor
    coverage_se: torch.Tensor
    draws: int
    excluded: int = 0

    @classmethod
    def from_z(
        cls, z: torch.Tensor, levels: Sequence[float] = DEFAULT_LEVELS
    ) -> CalibrationStatistics:
        """Statistics of standardised errors ``z`` of shape ``(draws, t)``.

        Averages over the test points of each draw first (:func:`z_statistics`), then
        over draws; the standard errors are the spread of the per-draw means over
        ``√draws``. ``NaN`` entries mark excluded points (counted in ``excluded``); a
        draw with every point excluded is left out of the averages (``draws`` counts
        the others), and with none left the statistics are ``NaN`` (nothing to
        calibrate), never a spurious 0. For studies that compute ``z`` themselves,
        e.g. batched over draws.

        Parameters
        ----------
        z
            Standardised errors, shape ``(draws, t)``, ``draws ≥ 2``.
        levels
            Nominal coverage levels ``α ∈ (0, 1)``.

        Returns
        -------
        CalibrationStatistics
        """
        if not isinstance(z, torch.Tensor) or z.ndim != 2 or z.shape[0] < 2:
            raise ValueError(
                "z must be a tensor of shape (draws, t) with at least 2 draws (rows) for "
                f"standard errors, got {getattr(z, 'shape', type(z).__name__)}"
            )
        mean_z2, coverage = z_statistics(z, levels)
        kept = ~torch.isnan(mean_z2)  # draws with at least one point left
        mean_z2, coverage = mean_z2[kept], coverage[kept]
        d = int(kept.sum())
        nan = torch.full((len(levels),), math.nan, dtype=z.dtype, device=z.device)
        return cls(
            mean_z2=float(mean_z2.mean()) if d else math.nan,
            mean_z2_se=float(mean_z2.std() / math.sqrt(d)) if d >= 2 else math.nan,
            levels=_levels(levels, z),
            coverage=coverage.mean(0) if d else nan,
            coverage_se=coverage.std(0) / math.sqrt(d) if d >= 2 else nan,
            draws=d,
            excluded=int(torch.isnan(z).sum()),
        )

    def coverage_at(self, level: float) -> tuple[float, float]:
        """``(coverage, standard error)`` at the nominal ``level`` (one of :attr:`levels`)."""
        hits = (self.levels - level).abs() < 1e-12
        if not bool(hits.any()):
            raise ValueError(f"level {level} is not one of {self.levels.tolist()}")
        j = int(hits.nonzero()[0, 0])
        return float(self.coverage[j]), float(self.coverage_se[j])


def z_statistics(
    z: torch.Tensor, levels: Sequence[float] = DEFAULT_LEVELS
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-draw ``mean z²`` and coverage of standardised errors.

    Parameters
    ----------
    z
        Standardised errors, shape ``(draws, t)`` (``NaN`` marks excluded points).
    levels
        Nominal levels ``α ∈ (0, 1)``.

    Returns
    -------
    mean_z2 : torch.Tensor
        Shape ``(draws,)``; ``NaN`` for a draw whose points are all excluded.
    coverage : torch.Tensor
        Shape ``(draws, L)``: fraction of a draw's points with ``|z| ≤ Φ⁻¹((1+α)/2)``.
    """
    if not isinstance(z, torch.Tensor) or z.ndim != 2:
        raise ValueError("z must be a tensor of shape (draws, t)")
    alphas = _levels(levels, z)
    valid = ~torch.isnan(z)
    count = valid.sum(1).to(z.dtype)  # 0 for a draw with every point excluded: NaN below
    z0 = torch.where(valid, z, torch.zeros_like(z))
    mean_z2 = (z0 * z0).sum(1) / count
    q = math.sqrt(2.0) * torch.erfinv(alphas)  # Φ⁻¹((1 + α)/2)
    inside = (z0.abs().unsqueeze(-1) <= q) & valid.unsqueeze(-1)
    return mean_z2, inside.sum(1).to(z.dtype) / count.unsqueeze(-1)


def prior_draw_calibration(
    kernel: StationaryKernel,
    noise: float,
    X: torch.Tensor,
    Xs: torch.Tensor,
    posterior: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Any],
    *,
    draws: int,
    generator: torch.Generator,
    levels: Sequence[float] = DEFAULT_LEVELS,
) -> dict[str, CalibrationStatistics]:
    """Calibration of a GP model's computational and combined variance on prior draws.

    For each draw: ``f ~ GP(0, kernel)`` jointly at ``[X; Xs]``, ``y = f(X) + √noise ε``;
    ``posterior(X, y, Xs)`` is the model under test (anything with ``mean`` and ``var``
    of shape ``(t,)``, e.g. ``pn.gp.IterGP(...).fit(X, y).posterior(Xs)``). The exact GP
    posterior mean and variance at ``Xs`` are computed densely (Cholesky) as reference.
    Dense linear algebra of size ``n + t``: for studies and tests.

    Parameters
    ----------
    kernel
        The prior covariance the data are drawn from (the model should use it too).
    noise
        Observation-noise variance ``σ² > 0`` of the draws (a float or a 0-d tensor).
    X, Xs
        Training inputs ``(n, d)`` and test inputs ``(t, d)``, same dtype and device
        (NumPy arrays are converted).
    posterior
        ``posterior(X, y, Xs)`` → an object with ``mean`` and ``var`` of ``t`` entries
        at ``Xs``; a variance below zero is refused.
    draws
        Number of prior draws (≥ 2, for standard errors).
    generator
        The only source of randomness (draws ``f`` and ``ε``).
    levels
        Nominal coverage levels.

    Returns
    -------
    dict
        ``"computational"`` and ``"combined"`` :class:`CalibrationStatistics`. Points
        whose computational variance is at rounding level (``≤ √eps`` times the prior
        variance: the computation left nothing to calibrate there) are excluded from the
        computational statistics and counted in ``excluded``.
    """
    generator = require_generator(generator)
    draws = check_positive_int(draws, "draws")
    if draws < 2:
        raise ValueError(f"draws must be at least 2 (for standard errors), got {draws}")
    noise = check_positive_number(noise, "noise", what="variance", tensor=True)
    X = check_inputs(X, "X")
    Xs = check_inputs(Xs, "Xs", d=X.shape[1], like=X)
    n = X.shape[0]
    with torch.no_grad():
        Kall = kernel(torch.cat([X, Xs]))
        jitter = math.sqrt(torch.finfo(X.dtype).eps) * float(Kall.diagonal().mean())
        eye = torch.eye(Kall.shape[0], dtype=X.dtype, device=X.device)
        root = torch.linalg.cholesky(Kall + jitter * eye)
        Khat = Kall[:n, :n] + noise * torch.eye(n, dtype=X.dtype, device=X.device)
        chol = torch.linalg.cholesky(Khat)
        half = torch.linalg.solve_triangular(chol, Kall[:n, n:], upper=False)
        math_var = Kall.diagonal()[n:] - half.square().sum(0)
        floor = math.sqrt(torch.finfo(X.dtype).eps) * float(Kall.diagonal()[n:].max())
    z_comp, z_comb = [], []
    for _ in range(draws):
        shape = (Kall.shape[0],)
        f = root @ rnd.randn(shape, generator=generator, dtype=X.dtype, device=X.device)
        eps = rnd.randn(n, generator=generator, dtype=X.dtype, device=X.device)
        y = f[:n] + math.sqrt(noise) * eps
        post = posterior(X, y, Xs)
        with torch.no_grad():
            mean, var = _moments(post, X, Xs.shape[0])
            exact = Kall[n:, :n] @ torch.cholesky_solve(y.unsqueeze(-1), chol).squeeze(-1)
            comp = var - math_var
            ok = comp > floor
            z_comp.append(torch.where(ok, (mean - exact) / comp.clamp_min(floor).sqrt(), math.nan))
            z_comb.append((mean - f[n:]) / var.clamp_min(floor).sqrt())
    return {
        "computational": CalibrationStatistics.from_z(torch.stack(z_comp), levels),
        "combined": CalibrationStatistics.from_z(torch.stack(z_comb), levels),
    }


def _moments(post: object, like: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The checked ``(mean, var)`` at the ``t`` test points of a user's posterior."""
    if not (hasattr(post, "mean") and hasattr(post, "var")):
        raise TypeError(
            "posterior(X, y, Xs) must return an object with .mean and .var (e.g. a "
            f"pnsolve GaussianPosterior), got {type(post).__name__}"
        )
    out = []
    for part in ("mean", "var"):
        value = torch.as_tensor(getattr(post, part), device=like.device).detach()
        if value.numel() != t:
            raise ValueError(
                f"posterior(X, y, Xs).{part} must have shape ({t},) for the {t} test "
                f"inputs, got {tuple(value.shape)}"
            )
        out.append(check_finite(value.reshape(t).to(like.dtype), f"posterior {part}"))
    if bool((out[1] < 0).any()):
        bad = int((out[1] < 0).sum())
        raise ValueError(
            f"posterior(X, y, Xs).var is negative at {bad} of {t} test points (minimum "
            f"{float(out[1].min()):.3g}): a variance must be ≥ 0"
        )
    return out[0], out[1]


def _levels(levels: Sequence[float], like: torch.Tensor) -> torch.Tensor:
    alphas = torch.as_tensor(list(levels), dtype=like.dtype, device=like.device)
    if alphas.ndim != 1 or alphas.numel() == 0 or not bool(((alphas > 0) & (alphas < 1)).all()):
        raise ValueError(f"levels must be numbers in (0, 1), got {list(levels)}")
    return alphas
