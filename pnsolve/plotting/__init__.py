"""Matplotlib figures (imported lazily; matplotlib is only needed when plotting)."""

from .convergence import plot_convergence

__all__ = ["plot_convergence"]
