"""Matplotlib figures (imported lazily; matplotlib is only needed when plotting)."""

from .convergence import plot_convergence
from .coverage import plot_coverage
from .elbo import plot_elbo
from .gp_band import draw_gp_band, plot_gp_band
from .mcmc import plot_psrf, plot_traces
from .tradeoff import plot_tradeoff
from .training import plot_training

__all__ = [
    "draw_gp_band",
    "plot_convergence",
    "plot_coverage",
    "plot_elbo",
    "plot_gp_band",
    "plot_psrf",
    "plot_traces",
    "plot_tradeoff",
    "plot_training",
]
