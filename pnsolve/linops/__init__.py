"""Linear operators: the objects every pnsolve solver multiplies with.

See :class:`LinearOperator` for the protocol. Concrete operators: :class:`Dense`,
:class:`Diagonal`, :class:`ScaledIdentity`, :class:`LowRank`, :class:`Closure`,
:class:`Sum`, :class:`Scaled`, :class:`Product`, :class:`BlockDiagonal` and the
:class:`RepeatedBlockDiagonal`; for structured kernel interpolation (SKI) the
symmetric (multilevel) :class:`Toeplitz`, :class:`Kronecker` products and the
:class:`SparseInterpolation` weights. :func:`as_linop` wraps tensors, NumPy arrays and
SciPy operators; :mod:`pnsolve.linops.checks` validates operators and operands for
every solver. Kernel matrices (:class:`pnsolve.kernels.KernelMatrix`) live with the
kernels.
"""

from .base import LinearOperator
from .block_diagonal import BlockDiagonal
from .closure import Closure
from .conversion import as_linop
from .dense import Dense
from .diagonal import Diagonal
from .interpolation import SparseInterpolation
from .kronecker import Kronecker
from .low_rank import LowRank
from .product import Product
from .repeated_block import RepeatedBlockDiagonal
from .scaled import Scaled
from .scaled_identity import ScaledIdentity
from .sum import Sum
from .toeplitz import Toeplitz
from .transpose import Transpose

__all__ = [
    "BlockDiagonal",
    "Closure",
    "Dense",
    "Diagonal",
    "Kronecker",
    "LinearOperator",
    "LowRank",
    "Product",
    "RepeatedBlockDiagonal",
    "Scaled",
    "ScaledIdentity",
    "SparseInterpolation",
    "Sum",
    "Toeplitz",
    "Transpose",
    "as_linop",
]
