"""Shared figure plumbing: a headless backend, output folders, saving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["new_figure", "new_panels", "save_figure"]


def new_figure(path: str | Path, figsize: tuple[float, float]) -> tuple[Any, Any, Path]:
    """``(fig, ax, path)`` on a non-interactive backend, with ``path``'s folder made."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=figsize, dpi=120)
    return fig, ax, path


def new_panels(
    path: str | Path, figsize: tuple[float, float], rows: int, cols: int, **subplots: Any
) -> tuple[Any, Any, Path]:
    """``(fig, axes, path)`` as :func:`new_figure`, with a ``rows × cols`` grid of axes.

    Parameters
    ----------
    path, figsize
        As in :func:`new_figure`.
    rows, cols
        Shape of the grid.
    **subplots
        Further keywords of ``Figure.subplots`` (``sharex``, ``squeeze``, ...).

    Returns
    -------
    tuple
        The figure, the axes as ``Figure.subplots`` returns them (an array of shape
        ``(rows, cols)`` unless squeezed) and ``path`` as a ``Path``.
    """
    fig, _, path = new_figure(path, figsize)
    fig.clf()
    return fig, fig.subplots(rows, cols, **subplots), path


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write and close ``fig``; return ``path``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
