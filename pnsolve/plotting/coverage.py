"""Coverage against nominal level: whether reported uncertainty is an error bar."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..metrics.calibration import CalibrationStatistics
from ._figure import new_figure, save_figure

__all__ = ["plot_coverage"]


def plot_coverage(
    results: Mapping[str, CalibrationStatistics],
    path: str | Path,
    *,
    title: str = "Coverage of central intervals on prior draws",
) -> Path:
    """Empirical coverage against nominal level per method, with ±2 standard errors.

    A calibrated method lies on the diagonal; above it the intervals are too wide,
    below it over-confident.

    Parameters
    ----------
    results
        Label → :class:`~pnsolve.metrics.CalibrationStatistics` (e.g. one policy's
        computational or combined statistics from
        :func:`~pnsolve.metrics.prior_draw_calibration`).
    path
        Output PNG; parent folders are created.
    title
        Figure title.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    fig, ax, path = new_figure(path, (5.5, 5.0))
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="calibrated")
    for label, stats in results.items():
        # host round trip: matplotlib draws NumPy arrays
        lv = stats.levels.cpu().numpy()
        cov = stats.coverage.cpu().numpy()
        se = stats.coverage_se.cpu().numpy()
        ax.errorbar(lv, cov, yerr=2 * se, marker="o", ms=4, capsize=2, label=label)
    ax.set_xlim(0.45, 1.0)
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("nominal level α of the central interval")
    ax.set_ylabel("empirical coverage")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left")
    return save_figure(fig, path)
