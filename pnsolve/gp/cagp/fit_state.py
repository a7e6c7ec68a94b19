"""What :meth:`~pnsolve.gp.CaGP.fit` leaves for prediction: :class:`CaGPFitState`."""

from __future__ import annotations

from dataclasses import dataclass

from .._fitted import FitRecord
from .elbo import CaGPFactors

__all__ = ["CaGPFitState"]


@dataclass(frozen=True)
class CaGPFitState(FitRecord):
    """What :meth:`CaGP.fit` left for prediction, and from what (never modified).

    The fields of every model's ``FitRecord`` (``provenance``: data, kernel, noise,
    mean and the actions; ``X``, ``y``, ``A = K̂`` matrix-free) and:

    Attributes
    ----------
    factors
        ``L = chol(SᵀK̂S)`` and ``v = (SᵀK̂S)⁻¹ Sᵀ(y − μ)`` in float64
        (:class:`~pnsolve.gp.cagp.elbo.CaGPFactors`).
    elbo
        The ELBO at these hyperparameters and actions (a float).
    """

    factors: CaGPFactors
    elbo: float
