"""Convergence plots for iterative solvers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from ._figure import new_figure, save_figure

__all__ = ["plot_convergence"]


def plot_convergence(
    histories: Mapping[str, torch.Tensor],
    path: str | Path,
    *,
    title: str = "Convergence",
    ylabel: str = "relative residual ‖r_i‖ / ‖b‖",
    reference: float | None = None,
) -> Path:
    """Plot residual histories on a log scale and save them as a PNG.

    Parameters
    ----------
    histories
        Label → tensor of shape ``(iterations + 1,)`` (or ``(iterations + 1, k)``,
        of which each column is drawn) holding the quantity per iteration.
    path
        Output file; parent folders are created.
    title, ylabel
        Figure texts.
    reference
        Optional horizontal line (e.g. the tolerance).

    Returns
    -------
    pathlib.Path
        The written file.
    """
    fig, ax, path = new_figure(path, (6.4, 4.0))
    for label, h in histories.items():
        h = h.detach().cpu()  # host round trip: matplotlib draws NumPy arrays
        if h.ndim == 1:
            h = h.unsqueeze(-1)
        for j in range(h.shape[1]):
            ax.semilogy(h[:, j].numpy(), label=label if j == 0 else None)
    if reference is not None:
        ax.axhline(reference, color="0.5", ls="--", lw=1, label="tolerance")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return save_figure(fig, path)
