"""Beliefs about the solution of ``A x = b``: Gaussian, with a low-rank downdated covariance."""

from .._core.columns import ColumnBuffer
from .affine import AffineCovariance, AffineSolutionBelief
from .covariance import DowndatedCovariance
from .gaussian_solution import GaussianSolutionBelief
from .priors import GaussianPrior, InversePrior, Prior, as_prior

__all__ = [
    "AffineCovariance",
    "AffineSolutionBelief",
    "ColumnBuffer",
    "DowndatedCovariance",
    "GaussianPrior",
    "GaussianSolutionBelief",
    "InversePrior",
    "Prior",
    "as_prior",
]
