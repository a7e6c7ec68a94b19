"""Bernoulli likelihood for binary classification, logit or probit link."""

from __future__ import annotations

import math

import torch

from .._core.validation import check_binary_labels, check_choice
from ..linops.diagonal import Diagonal
from .base import Likelihood, curvature_floor

__all__ = ["Bernoulli"]

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_SQRT_HALF = math.sqrt(0.5)


class Bernoulli(Likelihood):
    """``p(y = 1 | f) = λ(f)`` with ``λ = σ`` (logit) or ``λ = Φ`` (probit); ``y ∈ {0, 1}``.

    With ``s = 2y − 1`` (so ``p(y | f) = λ(s f)`` for both links):

    - **logit**: ``log p = log σ(s f)``, ``g = y − σ(f)``, ``W = σ(f) σ(−f)``.
    - **probit**: ``log p = log Φ(z)`` with ``z = s f`` (``torch.special.log_ndtr``,
      stable in both tails), ``g = s r`` with the inverse Mills ratio
      ``r = φ(z)/Φ(z) = √(2/π) / erfcx(−z/√2)`` (accurate in both tails), and
      ``W = r (z + r)`` (in ``(0, 1)``; for ``z ≪ 0``, ``z + r ≈ −1/z`` loses about
      ``log10(z²)`` digits, e.g. 4 in float32 at ``z = −100``, where ``W ≈ 1 − 1/z²``).

    ``W`` is diagonal; it is clamped below at :func:`curvature_floor` (``√eps`` of the
    dtype; the probit ``W`` also above at its supremum ``1``, against rounding in
    ``z + r`` for ``z ≪ 0``), so that ``W⁻¹ ≤ 1/√eps`` stays finite and well scaled when
    the curvature is tiny (``|f| ≳ 18`` for the logit link in float64).

    Parameters
    ----------
    link
        ``"logit"`` (default) or ``"probit"``.

    Notes
    -----
    :meth:`predict` returns ``p(y = 1)``, shape ``(t,)``. ``method="probit"``: for the
    probit link the exact ``Φ(m / √(1 + v))``; for the logit link MacKay's probit
    approximation ``σ(m / √(1 + πv/8))`` (Bishop, PRML §4.5.2), whose absolute error
    (against quadrature) is below 0.005 for ``v ≤ 1``, about 0.01 for ``v ≤ 4`` and at
    most about 0.02 for any ``m`` and ``v``.
    ``method="mc"``: the average of ``λ(f)`` over draws ``f ~ N(m, v)``.
    """

    num_latent = 1
    analytic_methods = ("probit",)

    def __init__(self, link: str = "logit") -> None:
        check_choice(link, "link", ("logit", "probit"))
        self._link = link

    @property
    def link(self) -> str:
        """``"logit"`` or ``"probit"``."""
        return self._link

    def __repr__(self) -> str:
        return f"Bernoulli(link={self._link!r})"

    def check_targets(self, y: object) -> torch.Tensor:
        """Labels in ``{0, 1}`` (bool, integer or floating), returned floating, ``(n,)``."""
        return check_binary_labels(y, "y")

    # ------------------------------------------------------------ probit helpers
    @staticmethod
    def _mills(z: torch.Tensor) -> torch.Tensor:
        """Inverse Mills ratio ``φ(z)/Φ(z) = √(2/π) / erfcx(−z/√2)``.

        The scaled complementary error function ``erfcx(u) = e^{u²} erfc(u)`` avoids the
        cancellation of ``log φ(z) − log Φ(z)`` for ``z ≪ 0`` (where ``r ≈ −z``); for
        ``z ≫ 0`` it overflows to ``inf`` exactly when ``r`` underflows to ``0``.
        """
        return _SQRT_2_OVER_PI / torch.special.erfcx(-z * _SQRT_HALF)

    def _curvature(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        floor = curvature_floor(f.dtype)
        if self._link == "logit":
            return (torch.sigmoid(f) * torch.sigmoid(-f)).clamp(min=floor)
        z = (2 * y - 1) * f
        r = self._mills(z)
        return (r * (z + r)).clamp(min=floor, max=1.0)

    # -------------------------------------------------------------- likelihood
    def _log_likelihood(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        z = (2 * y - 1) * f
        if self._link == "logit":
            return torch.nn.functional.logsigmoid(z)
        return torch.special.log_ndtr(z)

    def _gradient(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self._link == "logit":
            return y - torch.sigmoid(f)
        s = 2 * y - 1
        return s * self._mills(s * f)

    def _hessian(self, f: torch.Tensor, y: torch.Tensor) -> Diagonal:
        return Diagonal(self._curvature(f, y))

    def _noise(self, f: torch.Tensor, y: torch.Tensor) -> Diagonal:
        return Diagonal(self._curvature(f, y).reciprocal())

    # -------------------------------------------------------------- prediction
    def _predict_analytic(self, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        if self._link == "logit":
            return torch.sigmoid(mean / torch.sqrt(1 + math.pi / 8 * var))
        return torch.special.ndtr(mean / torch.sqrt(1 + var))

    def _response(self, f: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(f) if self._link == "logit" else torch.special.ndtr(f)
