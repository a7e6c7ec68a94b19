"""Matplotlib figures (imported lazily; matplotlib is only needed when plotting)."""

from .convergence import plot_convergence
from .tradeoff import plot_tradeoff

__all__ = ["plot_convergence", "plot_tradeoff"]
