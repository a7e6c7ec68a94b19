"""The ELBO of a variational training run (CaGP) against its steps."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ._figure import new_figure, save_figure

__all__ = ["plot_elbo"]


def plot_elbo(
    history: Sequence[dict[str, float]],
    n: int,
    path: str | Path,
    *,
    title: str = "ELBO during training",
) -> Path:
    """The ELBO per training row at every step (before its update), as a PNG.

    Parameters
    ----------
    history
        Per step ``{"step", "elbo", ...}``, e.g. ``CaGP.training.history``.
    n
        Training rows (the ELBO is divided by it).
    path
        Where the PNG goes (its folder is created).
    title
        The figure's title.

    Returns
    -------
    Path
        The file written.
    """
    fig, ax, out = new_figure(path, (6.4, 4.0))
    ax.plot([r["step"] for r in history], [r["elbo"] / n for r in history], color="C0")
    ax.set_xlabel("Adam step")
    ax.set_ylabel("ELBO / n")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return save_figure(fig, out)
