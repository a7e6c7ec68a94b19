"""Kernels: the families, their algebra, SKI and random Fourier features.

Stationary families (RBF, Matérn ν ∈ {1/2, 3/2, 5/2}, rational quadratic, with ARD)
and the others (periodic, cosine, linear, polynomial, constant, white noise, spectral
mixture); ``k1 + k2``, ``k1 * k2`` and ``c * k`` combine them, and ``active_dims=``
restricts any family to some input columns. ``k(X1, X2)`` returns the dense kernel
matrix; ``k.linop(X1, X2)`` the matrix-free :class:`~pnsolve.kernels.KernelMatrix`,
whose backends evaluate a whole expression in one pass. Conventions: ``r = ‖x − x'‖ /
lengthscale`` (per dimension for ARD), ``outputscale`` multiplies.
:class:`GridInterpolation` (SKI) wraps a stationary kernel with cubic interpolation on
a regular grid; every kernel follows the :class:`Kernel` protocol the GP models use.
"""

from .base import StationaryKernel
from .composite import Product, Sum
from .constant import Constant, White
from .expression import from_expression
from .gpytorch_interop import from_gpytorch
from .gpytorch_kernel import GPyTorchKernel
from .grid_interpolation import GridInterpolation
from .kernel import Kernel
from .kernel_matrix import KernelMatrix
from .linear import Linear, Polynomial
from .matern import Matern
from .periodic import Cosine, Periodic
from .random_features import RandomFourierFeatures
from .rational_quadratic import RationalQuadratic
from .rbf import RBF
from .scale import Scale
from .sklearn_export import to_sklearn
from .sklearn_interop import from_sklearn
from .spectral_mixture import SpectralMixture

__all__ = [
    "RBF",
    "Constant",
    "Cosine",
    "GPyTorchKernel",
    "GridInterpolation",
    "Kernel",
    "KernelMatrix",
    "Linear",
    "Matern",
    "Periodic",
    "Polynomial",
    "Product",
    "RandomFourierFeatures",
    "RationalQuadratic",
    "Scale",
    "SpectralMixture",
    "StationaryKernel",
    "Sum",
    "White",
    "from_expression",
    "from_gpytorch",
    "from_sklearn",
    "to_sklearn",
]
