"""Action policies: the user's main lever over what a probabilistic solver computes.

A policy maps the read-only :class:`~pnsolve.SolverState` to the next action (or
block of actions); the solver applies ``A`` to it once. Built-ins:

- :class:`CG`: the (preconditioned) residual; the mean equals the CG iterate.
- :class:`UnitVector`: coordinate vectors (sequential, random, largest-residual
  pivot, largest Schur-complement diagonal); the mean is the partial-Cholesky /
  subset-of-data solution.
- :class:`Random`: i.i.d. Gaussian, Rademacher or sparse-sign directions.
- :class:`Lanczos`: orthonormal Krylov basis vectors (no extra product), started from
  the residual (CG's space) or from a ``b``-independent vector.
- :class:`PivotedCholeskyActions`: the columns of ``A``'s greedy pivoted Cholesky factor
  (subset of regressors / Nyström with greedily chosen inducing points).
- :class:`PseudoInput`: kernel columns ``k(X, z_j)`` at pseudo-inputs.
- :class:`Projected`: another policy's actions times a projector (singular systems).
- :class:`Recycled`: the actions of a :class:`~pnsolve.krylov.KrylovBuffer`, replayed.
- :class:`Custom`: wrap a function of the state.
- :class:`Switch`, :class:`Mixed`: compose policies by iteration or at random.

Every policy says whether it is :attr:`~Policy.adaptive` (its actions may depend on
``b``): ``CG``, ``Lanczos()`` (residual start), ``UnitVector("pivot")``, ``Recycled``
and ``Custom`` (both unless declared otherwise) are; ``Random``, ``PseudoInput``,
``PivotedCholeskyActions``, ``UnitVector("sequential" | "random" | "schur")`` and
``Lanczos(start="random" | tensor)`` are not; ``Mixed``/``Switch`` are adaptive if a
part is, ``Projected`` if the wrapped policy is. Beliefs built from non-adaptive
actions only are exact Gaussian inference and calibrated (``belief.calibrated``);
CG's are not: its covariance is no error bar.
"""

from .._core.deprecation import renamed_attributes
from .base import Policy
from .cg import CG
from .composite import Mixed, Switch
from .custom import Custom
from .lanczos_actions import Lanczos, LanczosMemory
from .pivoted_cholesky import PivotedCholeskyActions, PivotedCholeskyMemory
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
    "PivotedCholeskyActions",
    "PivotedCholeskyMemory",
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

#: Old names, importable with a DeprecationWarning.
__getattr__ = renamed_attributes(__name__, {"PivotedCholesky": "PivotedCholeskyActions"})
