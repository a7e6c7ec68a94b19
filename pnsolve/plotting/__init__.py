"""Matplotlib figures (imported lazily; matplotlib is only needed when plotting)."""

from .convergence import plot_convergence
from .coverage import plot_coverage
from .gp_band import draw_gp_band, plot_gp_band
from .tradeoff import plot_tradeoff
from .training import plot_training

__all__ = [
    "draw_gp_band",
    "plot_convergence",
    "plot_coverage",
    "plot_gp_band",
    "plot_tradeoff",
    "plot_training",
]
