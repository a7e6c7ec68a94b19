"""MCMC figures: traces with running statistics, and PSRF curves.

The two panels of Filippone & Engler (2015), Fig. 5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:  # importing numpy.typing at run time would add np.typing to numpy
    from numpy.typing import ArrayLike

from .._core.validation import check_finite
from ..metrics.mcmc import DEFAULT_CONFIDENCE, PSRF_THRESHOLD
from ._figure import new_panels, save_figure

__all__ = ["plot_psrf", "plot_traces"]

#: Height of one parameter's panel, inches.
PANEL_HEIGHT = 2.2
#: Width of the figures, inches.
FIGURE_WIDTH = 7.0
#: Half-width of the running band, in running standard deviations.
BAND_SDS = 2.0


def plot_traces(
    samples: torch.Tensor | ArrayLike,
    names: Sequence[str],
    path: str | Path,
    *,
    reference: torch.Tensor | ArrayLike | None = None,
    label: str = "samples",
    reference_label: str = "reference",
    title: str = "Traces with running mean ± 2 sd",
) -> Path:
    """Per parameter: one chain's trace and the running mean ± 2 running sd.

    As in Filippone & Engler (2015), Fig. 5 (left): the trace of chain 0 (gray), and
    after each iteration ``t`` the mean and ``mean ± 2 sd`` of the draws ``1 … t`` of all
    chains pooled (black); the same running statistics of ``reference`` samples (e.g.
    Metropolis–Hastings) in red.

    Parameters
    ----------
    samples
        Draws, shape ``(chains, draws, parameters)``, finite.
    names
        One name per parameter (the panels' y labels).
    path
        Output PNG; parent folders are created.
    reference
        Optional reference draws, shape ``(chains', draws', parameters)``.
    label, reference_label
        Legend labels of the two samplers.
    title
        Title above the top panel.

    Returns
    -------
    pathlib.Path
        The written file.

    Raises
    ------
    ValueError
        For samples of the wrong shape or with NaN/Inf values, or ``names`` of the
        wrong length.
    """
    x = _draws(samples, "samples")
    p = x.shape[2]
    labels = _names(names, p)
    ref = None if reference is None else _draws(reference, "reference")
    if ref is not None and ref.shape[2] != p:
        raise ValueError(
            f"reference has {ref.shape[2]} parameters but samples has {p}: they must match"
        )
    fig, axes, path = _panel_column(path, p)
    iterations = np.arange(1, x.shape[1] + 1)
    mean, sd = _running_moments(x)
    if ref is not None:
        ref_iterations = np.arange(1, ref.shape[1] + 1)
        ref_mean, ref_sd = _running_moments(ref)
    for j, ax in enumerate(axes):
        ax.plot(iterations, x[0, :, j], color="0.6", lw=0.6, label="chain 0")
        _band(ax, iterations, mean[:, j], sd[:, j], "black", label)
        if ref is not None:
            _band(ax, ref_iterations, ref_mean[:, j], ref_sd[:, j], "tab:red", reference_label)
        ax.set_ylabel(labels[j])
    axes[0].set_title(title)
    axes[0].legend(fontsize=8, loc="upper right")
    axes[-1].set_xlabel("iteration")
    return save_figure(fig, path)


def plot_psrf(
    steps: Sequence[int],
    psrf: torch.Tensor | ArrayLike,
    upper: torch.Tensor | ArrayLike,
    names: Sequence[str],
    path: str | Path,
    *,
    threshold: float = PSRF_THRESHOLD,
    confidence: float = DEFAULT_CONFIDENCE,
    title: str = "Potential scale reduction factor",
) -> Path:
    """PSRF and its upper limit against iteration, one panel per parameter.

    As in Filippone & Engler (2015), Fig. 5 (right), from
    :func:`pnsolve.metrics.psrf_curve`: the point estimate ("PSRF median", black) and
    the upper limit ("PSRF 97.5%", red dashed), a line at 1 and one at ``threshold``.
    Infinite values (stuck chains) are left out.

    Parameters
    ----------
    steps
        Iterations (prefix lengths), length ``S``.
    psrf, upper
        Point estimates and upper limits, shape ``(S, parameters)`` each.
    names
        One name per parameter (the panels' titles).
    path
        Output PNG; parent folders are created.
    threshold
        Convergence threshold drawn as a dotted line (Filippone & Engler 2015: 1.1).
    confidence
        Level of ``upper`` (as given to :func:`~pnsolve.metrics.psrf_curve`); names
        its quantile in the legend.
    title
        Figure title, above the panels.

    Returns
    -------
    pathlib.Path
        The written file.

    Raises
    ------
    ValueError
        If the shapes of ``steps``, ``psrf``, ``upper`` and ``names`` disagree.
    """
    its = np.asarray(steps, dtype=np.float64).reshape(-1)
    point = _curve(psrf, "psrf", len(its))
    high = _curve(upper, "upper", len(its))
    if point.shape != high.shape:
        raise ValueError(
            f"psrf and upper must have the same shape, got {point.shape} and {high.shape}"
        )
    p = point.shape[1]
    labels = _names(names, p)
    quantile = 100.0 * (1.0 + confidence) / 2.0
    fig, axes, path = _panel_column(path, p)
    for j, ax in enumerate(axes):
        ax.plot(its, point[:, j], color="black", lw=1.2, label="PSRF median")
        ax.plot(its, high[:, j], color="tab:red", lw=1.2, ls="--", label=f"PSRF {quantile:g}%")
        ax.axhline(1.0, color="0.6", lw=0.8)
        ax.axhline(threshold, color="0.3", lw=0.8, ls=":", label=f"{threshold:g}")
        ax.set_ylabel("PSRF")
        ax.set_title(labels[j], fontsize=9)
    axes[0].legend(fontsize=8, loc="upper right")
    axes[-1].set_xlabel("iteration")
    fig.suptitle(title)
    return save_figure(fig, path)


def _panel_column(path: str | Path, p: int) -> tuple[Any, np.ndarray, Path]:
    """A figure with ``p`` stacked panels sharing the x axis: ``(fig, axes (p,), path)``."""
    fig, axes, path = new_panels(
        path, (FIGURE_WIDTH, PANEL_HEIGHT * p + 0.6), p, 1, sharex=True, squeeze=False
    )
    return fig, axes[:, 0], path


def _draws(samples: object, name: str) -> np.ndarray:
    """Finite draws ``(chains, draws, parameters)`` as a float64 numpy array."""
    try:  # host round trip: matplotlib draws NumPy arrays
        x = np.asarray(
            samples.detach().cpu().to(torch.float64)
            if isinstance(samples, torch.Tensor)
            else samples,
            dtype=np.float64,
        )
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{name} must be a tensor or array of real numbers, got {type(samples).__name__}"
        ) from err
    if x.ndim != 3 or 0 in x.shape:
        raise ValueError(
            f"{name} must have shape (chains, draws, parameters), got {tuple(x.shape)}"
        )
    check_finite(torch.from_numpy(x), name)
    return x


def _curve(values: object, name: str, steps: int) -> np.ndarray:
    """A ``(steps, parameters)`` curve with infinite values replaced by NaN (not drawn)."""
    # host round trip: matplotlib draws NumPy arrays
    v = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else values
    out = np.asarray(v, dtype=np.float64)
    if out.ndim != 2 or out.shape[0] != steps or out.shape[1] == 0:
        raise ValueError(
            f"{name} must have shape (len(steps) = {steps}, parameters), got {out.shape}"
        )
    return np.where(np.isinf(out), np.nan, out)


def _names(names: Sequence[str], p: int) -> list[str]:
    if isinstance(names, str) or len(names) != p:
        raise ValueError(f"names must hold one name per parameter ({p}), got {names!r}")
    return [str(s) for s in names]


def _running_moments(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of the draws ``1 … t`` of all chains pooled, for each ``t``.

    Shapes ``(draws, parameters)``; the sd is ``NaN`` until two draws are pooled.
    """
    chains = x.shape[0]
    centred = x - x.mean((0, 1))  # shift first: the running sums stay well conditioned
    count = chains * np.arange(1, x.shape[1] + 1, dtype=np.float64)[:, None]
    first = np.cumsum(centred.sum(0), 0) / count
    second = np.cumsum(np.square(centred).sum(0), 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (second - count * np.square(first)) / (count - 1.0)
    sd = np.sqrt(np.clip(var, 0.0, None))
    return first + x.mean((0, 1)), np.where(count > 1, sd, math.nan)


def _band(ax: Any, t: np.ndarray, mean: np.ndarray, sd: np.ndarray, color: str, label: str) -> None:
    ax.plot(t, mean, color=color, lw=1.4, label=f"{label}: running mean ± {BAND_SDS:g} sd")
    ax.plot(t, mean + BAND_SDS * sd, color=color, lw=0.9)
    ax.plot(t, mean - BAND_SDS * sd, color=color, lw=0.9)
