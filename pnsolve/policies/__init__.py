"""Action policies: the user's main lever over what a probabilistic solver computes.

A policy maps the read-only :class:`~pnsolve.SolverState` to the next action (or
block of actions); the solver applies ``A`` to it once. Built-ins:

- :class:`CG`: the (preconditioned) residual; the mean equals the CG iterate.
- :class:`UnitVector`: coordinate vectors (sequential, random, largest-residual
  pivot); the mean is the partial-Cholesky / subset-of-data solution.
- :class:`Random`: i.i.d. Gaussian, Rademacher or sparse-sign directions.
- :class:`Lanczos`: orthonormal Krylov basis vectors (no extra product).
- :class:`PseudoInput`: kernel columns ``k(X, z_j)`` at pseudo-inputs.
- :class:`Projected`: another policy's actions times a projector (singular systems).
- :class:`Recycled`: the actions of a :class:`~pnsolve.krylov.KrylovBuffer`, replayed.
- :class:`Custom`: wrap a function of the state.
- :class:`Switch`, :class:`Mixed`: compose policies by iteration or at random.
"""

from .base import Policy
from .cg import CG
from .composite import Mixed, Switch
from .custom import Custom
from .lanczos_actions import Lanczos, LanczosMemory
from .projected import Projected
from .pseudo_input import PseudoInput, PseudoInputMemory
from .random_actions import Random
from .recycled import Recycled, RecycledMemory
from .unit_vector import UnitVector, UnitVectorMemory

__all__ = [
    "CG",
    "Custom",
    "Lanczos",
    "LanczosMemory",
    "Mixed",
    "Policy",
    "Projected",
    "PseudoInput",
    "PseudoInputMemory",
    "Random",
    "Recycled",
    "RecycledMemory",
    "Switch",
    "UnitVector",
    "UnitVectorMemory",
]
