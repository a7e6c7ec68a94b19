"""Stationary kernels (RBF, Matérn ν ∈ {1/2, 3/2, 5/2}, ARD) and random Fourier features.

``k(X1, X2)`` returns the dense kernel matrix; ``k.linop(X1, X2)`` the matrix-free
:class:`~pnsolve.kernels.KernelMatrix`. Conventions: ``r = ‖x − x'‖ / lengthscale``
(per dimension for ARD), ``outputscale`` multiplies.
"""

from .base import StationaryKernel
from .kernel_matrix import KernelMatrix
from .matern import Matern
from .random_features import RandomFourierFeatures
from .rbf import RBF

__all__ = ["RBF", "KernelMatrix", "Matern", "RandomFourierFeatures", "StationaryKernel"]
