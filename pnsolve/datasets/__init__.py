"""Data sets: UCI regression benchmarks, user CSV files, synthetic generators, digits, CO2.

UCI regression benchmarks with their standard splits, user CSV files, synthetic
generators (GP draws, Poisson counts, Gaussian-mixture classes), the digits
classification set (through scikit-learn), and the Mauna Loa CO2 monthly series.

Every loader returns typed results with torch tensors in the requested dtype and
device (``device=None``: torch's default device); every generator takes an explicit
``torch.Generator``, draws on that generator's device and moves the results, so a CPU
generator gives the same data on every device.
"""

from .co2 import mauna_loa_co2
from .csv import load_csv
from .dataset import Dataset
from .digits import ClassificationData, load_digits
from .gp_draws import GPDraws, gp_draws
from .mixture import GaussianMixtureClasses, gaussian_mixture_classes
from .poisson import PoissonCounts, poisson_counts
from .uci import available_uci, load_uci, uci_roots

__all__ = [
    "ClassificationData",
    "Dataset",
    "GPDraws",
    "GaussianMixtureClasses",
    "PoissonCounts",
    "available_uci",
    "gaussian_mixture_classes",
    "gp_draws",
    "load_csv",
    "load_digits",
    "load_uci",
    "mauna_loa_co2",
    "poisson_counts",
    "uci_roots",
]
