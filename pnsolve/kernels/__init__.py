"""Stationary kernels (RBF, Matérn ν ∈ {1/2, 3/2, 5/2}, rational quadratic, ARD), SKI, RFF.

``k(X1, X2)`` returns the dense kernel matrix; ``k.linop(X1, X2)`` the matrix-free
:class:`~pnsolve.kernels.KernelMatrix`. Conventions: ``r = ‖x − x'‖ / lengthscale``
(per dimension for ARD), ``outputscale`` multiplies. :class:`GridInterpolation` (SKI)
wraps a stationary kernel with cubic interpolation on a regular grid; every kernel
follows the :class:`Kernel` protocol the GP models use.
"""

from .base import StationaryKernel
from .grid_interpolation import GridInterpolation
from .kernel import Kernel
from .kernel_matrix import KernelMatrix
from .matern import Matern
from .random_features import RandomFourierFeatures
from .rational_quadratic import RationalQuadratic
from .rbf import RBF

__all__ = [
    "RBF",
    "GridInterpolation",
    "Kernel",
    "KernelMatrix",
    "Matern",
    "RandomFourierFeatures",
    "RationalQuadratic",
    "StationaryKernel",
]
