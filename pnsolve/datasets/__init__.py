"""Data: UCI regression benchmarks with their standard splits, user CSV files, and
synthetic generators (GP draws, Poisson counts, Gaussian-mixture classes).

Every loader returns typed results with torch tensors in the requested dtype and
device; every generator takes an explicit ``torch.Generator``.
"""

from .csv import load_csv
from .dataset import Dataset
from .gp_draws import GPDraws, gp_draws
from .mixture import GaussianMixtureClasses, gaussian_mixture_classes
from .poisson import PoissonCounts, poisson_counts
from .uci import available_uci, load_uci, uci_roots

__all__ = [
    "Dataset",
    "GPDraws",
    "GaussianMixtureClasses",
    "PoissonCounts",
    "available_uci",
    "gaussian_mixture_classes",
    "gp_draws",
    "load_csv",
    "load_uci",
    "poisson_counts",
    "uci_roots",
]
