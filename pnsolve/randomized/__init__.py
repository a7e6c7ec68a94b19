"""Randomized estimators built on Krylov methods.

:func:`ulisse` returns an *unbiased* estimate of ``A⁻¹b`` from CG stopped early at a
threshold and continued by Russian roulette with reweighted increments
(Filippone & Engler, "Enabling scalable stochastic gradient-based inference for
Gaussian processes by employing the Unbiased LInear System SolvEr (ULISSE)").
:func:`ulisse_belief` also returns the CG state at the truncation point as a
:class:`~pnsolve.beliefs.GaussianSolutionBelief`.
"""

from .ulisse import expected_roulette_steps, ulisse, ulisse_variance
from .ulisse_belief import ulisse_belief
from .ulisse_info import UlisseInfo

__all__ = [
    "UlisseInfo",
    "expected_roulette_steps",
    "ulisse",
    "ulisse_belief",
    "ulisse_variance",
]
