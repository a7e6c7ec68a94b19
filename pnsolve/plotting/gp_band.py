"""GP posterior bands on a 1-d input: mathematical and combined (computation-aware)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ._figure import new_figure, save_figure

__all__ = ["draw_gp_band", "plot_gp_band"]


def _np(t: torch.Tensor) -> Any:
    return t.detach().reshape(-1).cpu().numpy()  # host round trip: matplotlib draws NumPy


def draw_gp_band(
    ax: Any,
    x: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    *,
    math_var: torch.Tensor | None = None,
    reference_mean: torch.Tensor | None = None,
    X_train: torch.Tensor | None = None,
    y_train: torch.Tensor | None = None,
    z: float = 2.0,
    title: str | None = None,
) -> Any:
    """Draw a posterior mean with ``±z`` standard-deviation bands into ``ax``.

    The outer (light) band uses the combined variance ``var``; if ``math_var`` is
    given, an inner (darker) band shows the mathematical part alone, so the gap
    between the two is the computational uncertainty.

    Parameters
    ----------
    ax
        A matplotlib ``Axes``.
    x
        Sorted 1-d inputs, shape ``(t,)``.
    mean, var
        Posterior mean and combined marginal variance at ``x``, shape ``(t,)``.
    math_var
        Mathematical (exact-GP) variance at ``x``, shape ``(t,)``; optional.
    reference_mean
        The exact GP's mean at ``x`` (dashed), shape ``(t,)``; optional.
    X_train, y_train
        Training data to scatter, shapes ``(n,)``; optional.
    z
        Band half-width in standard deviations.
    title
        Axes title.

    Returns
    -------
    Any
        ``ax``.
    """
    xs, m = _np(x), _np(mean)
    sd = _np(var.clamp_min(0.0).sqrt())
    ax.fill_between(
        xs, m - z * sd, m + z * sd, color="C0", alpha=0.2, lw=0, label=f"±{z:g} sd (combined)"
    )
    if math_var is not None:
        sm = _np(math_var.clamp_min(0.0).sqrt())
        ax.fill_between(
            xs,
            m - z * sm,
            m + z * sm,
            color="C0",
            alpha=0.35,
            lw=0,
            label=f"±{z:g} sd (mathematical)",
        )
    if X_train is not None and y_train is not None:
        ax.plot(_np(X_train), _np(y_train), "k.", ms=3, alpha=0.5, label="data")
    if reference_mean is not None:
        ax.plot(xs, _np(reference_mean), "k--", lw=1, label="exact GP mean")
    ax.plot(xs, m, color="C0", lw=1.5, label="posterior mean")
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    return ax


def plot_gp_band(
    x: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    path: str | Path,
    *,
    math_var: torch.Tensor | None = None,
    reference_mean: torch.Tensor | None = None,
    X_train: torch.Tensor | None = None,
    y_train: torch.Tensor | None = None,
    z: float = 2.0,
    title: str = "GP posterior: mathematical and computational uncertainty",
    xlabel: str = "x",
) -> Path:
    """Plot one 1-d GP posterior band (see :func:`draw_gp_band`) and save it.

    Parameters
    ----------
    x, mean, var, math_var, reference_mean, X_train, y_train, z
        As in :func:`draw_gp_band`.
    path
        Output file; parent folders are created.
    title, xlabel
        Figure texts.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    fig, ax, path = new_figure(path, (7.0, 4.0))
    draw_gp_band(
        ax,
        x,
        mean,
        var,
        math_var=math_var,
        reference_mean=reference_mean,
        X_train=X_train,
        y_train=y_train,
        z=z,
        title=title,
    )
    ax.set_xlabel(xlabel)
    ax.legend(fontsize=7)
    return save_figure(fig, path)
