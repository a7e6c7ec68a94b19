"""Marginal-likelihood gradient estimators for GP hyperparameter training (Lin et al., 2024).

Each estimator turns solutions of ``K̂ V = B`` (from any solver) into an estimate of the
gradient of ``L(θ) = −log p(y | θ)``, accumulated into the parameters' ``.grad``:

* :class:`ExactEstimator` — Cholesky and autograd (reference, small ``n``);
* :class:`StandardEstimator` — Hutchinson probes ``z`` with ``E[z zᵀ] = I``;
* :class:`PathwiseEstimator` — probes ``ẑ = K̂⁻¹ ξ ~ N(0, K̂⁻¹)`` from prior function
  draws, whose solutions double as posterior samples.

The stochastic estimators freeze their random draws for warm starts (``resample()`` to
redraw, ``state_dict()``/``load_state_dict()`` to checkpoint).
"""

from .base import GradientEstimator
from .exact import ExactEstimator
from .pathwise import PathwiseDraws, PathwiseEstimator
from .standard import StandardEstimator

__all__ = [
    "ExactEstimator",
    "GradientEstimator",
    "PathwiseDraws",
    "PathwiseEstimator",
    "StandardEstimator",
]
