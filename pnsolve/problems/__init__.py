"""Linear-system problems: :class:`LinearSystem` and a zoo of SPD systems with named spectra.

>>> import torch, pnsolve as pn
>>> g = torch.Generator().manual_seed(0)
>>> problem = pn.problems.exponential_decay(50, cond=1e4, generator=g)
>>> problem.A.shape, problem.b.shape, round(problem.cond)
((50, 50), torch.Size([50]), 10000)
"""

from .linear_system import LinearSystem
from .spectra import (
    SPECTRA,
    clustered_spectrum,
    exponential_spectrum,
    polynomial_spectrum,
    rank_deficient_spectrum,
    spectrum,
)
from .zoo import (
    PROBLEMS,
    clustered,
    exponential_decay,
    kernel_gram,
    make_problem,
    polynomial_decay,
    random_orthogonal,
    rank_deficient_plus_jitter,
    spd_from_spectrum,
)

__all__ = [
    "PROBLEMS",
    "SPECTRA",
    "LinearSystem",
    "clustered",
    "clustered_spectrum",
    "exponential_decay",
    "exponential_spectrum",
    "kernel_gram",
    "make_problem",
    "polynomial_decay",
    "polynomial_spectrum",
    "random_orthogonal",
    "rank_deficient_plus_jitter",
    "rank_deficient_spectrum",
    "spd_from_spectrum",
    "spectrum",
]
