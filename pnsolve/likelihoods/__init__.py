"""Likelihoods for Laplace-type GP inference (IterNCGP): Gaussian, Bernoulli, Poisson, Softmax.

Each :class:`Likelihood` gives the per-point log-likelihood ``log p(yᵢ | fᵢ)``, its
gradient ``g``, the negative Hessian ``W`` and its (pseudo-)inverse as
:class:`~pnsolve.linops.LinearOperator` objects, and predictions from Gaussian latent
marginals (probit/MacKay approximation, closed form, or Monte Carlo with an explicit
``torch.Generator``).

**Latent layout.** ``f`` has shape ``(n,)`` for one latent function and ``(n, C)`` for
:class:`Softmax`. ``W`` and ``W⁻¹`` act on the **class-major** flat vector
``f.mT.reshape(-1)`` (all ``n`` values of class 0, then class 1, …; entry ``c·n + i``
is ``f[i, c]``), of length ``C·n``, and on matrices ``(C·n, k)``.
:meth:`Likelihood.flatten` / :meth:`Likelihood.unflatten` convert.
"""

from .base import Likelihood, curvature_floor
from .bernoulli import Bernoulli
from .gaussian import Gaussian
from .poisson import Poisson
from .softmax import Softmax
from .softmax_hessian import SoftmaxHessian, SoftmaxHessianPinv

__all__ = [
    "Bernoulli",
    "Gaussian",
    "Likelihood",
    "Poisson",
    "Softmax",
    "SoftmaxHessian",
    "SoftmaxHessianPinv",
    "curvature_floor",
]
