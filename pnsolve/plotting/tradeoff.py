"""Error-versus-uncertainty plots for probabilistic solvers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from ._figure import new_figure, save_figure

__all__ = ["plot_tradeoff"]


def plot_tradeoff(
    errors: Mapping[str, torch.Tensor],
    uncertainties: Mapping[str, torch.Tensor],
    path: str | Path,
    *,
    title: str = "Error and reported uncertainty",
    ylabel: str = "relative to ‖x*‖",
) -> Path:
    """Plot, per label, an error history (solid) and an uncertainty history (dashed).

    Parameters
    ----------
    errors
        Label → tensor of shape ``(iterations + 1,)``: the true error per iteration.
    uncertainties
        Label → tensor of the same shape: the uncertainty the solver reports
        (e.g. ``sqrt(tr Σ_i)``). Labels missing here are drawn without one.
    path
        Output file; parent folders are created.
    title, ylabel
        Figure texts.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    fig, ax, path = new_figure(path, (7.0, 4.2))
    for k, (label, e) in enumerate(errors.items()):  # host round trips: matplotlib draws NumPy
        color = f"C{k % 10}"
        ax.semilogy(e.detach().cpu().numpy(), color=color, label=f"{label}: error")
        if label in uncertainties:
            u = uncertainties[label].detach().cpu().numpy()
            ax.semilogy(u, color=color, ls="--", label=f"{label}: uncertainty")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(fig, path)
