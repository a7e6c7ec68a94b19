"""Poisson likelihood with log link for count data."""

from __future__ import annotations

import torch

from .._core.validation import check_counts
from ..linops.diagonal import Diagonal
from .base import Likelihood, curvature_floor

__all__ = ["Poisson"]


class Poisson(Likelihood):
    """``y ~ Poisson(e^f)`` for counts ``y ∈ {0, 1, 2, …}``.

    ``log p = y f − e^f − log Γ(y + 1)``, ``g = y − e^f``, ``W = diag(e^f)``,
    ``W⁻¹ = diag(e^{−f})``. ``W`` is clamped below at :func:`curvature_floor`
    (``√eps`` of the dtype) so that ``W⁻¹ ≤ 1/√eps`` stays finite and well scaled when
    ``e^f`` is tiny (``f ≲ −18`` in float64, ``f ≲ −8`` in float32).

    Notes
    -----
    :meth:`predict` returns the expected rate ``E[e^f]`` (the predictive mean of ``y``),
    shape ``(t,)``: ``method="closed_form"`` (alias ``"probit"``, the default) gives
    the exact log-normal mean ``exp(m + v/2)``; ``method="mc"`` averages ``e^f`` over
    draws ``f ~ N(m, v)``.
    """

    num_latent = 1
    analytic_methods = ("closed_form", "probit")

    def __repr__(self) -> str:
        return "Poisson()"

    def check_targets(self, y: object) -> torch.Tensor:
        """Non-negative integer counts (integer or integral floating), returned floating."""
        return check_counts(y, "y")

    def _curvature(self, f: torch.Tensor) -> torch.Tensor:
        return torch.exp(f).clamp(min=curvature_floor(f.dtype))

    def _log_likelihood(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return y * f - torch.exp(f) - torch.lgamma(y + 1)

    def _gradient(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return y - torch.exp(f)

    def _hessian(self, f: torch.Tensor, y: torch.Tensor) -> Diagonal:
        return Diagonal(self._curvature(f))

    def _noise(self, f: torch.Tensor, y: torch.Tensor) -> Diagonal:
        return Diagonal(self._curvature(f).reciprocal())

    def _predict_analytic(self, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        return torch.exp(mean + 0.5 * var)

    def _response(self, f: torch.Tensor) -> torch.Tensor:
        return torch.exp(f)
