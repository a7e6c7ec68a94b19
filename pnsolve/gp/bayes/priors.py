"""Priors on positive hyperparameters, as densities of their logarithms."""

from __future__ import annotations

import abc
import math

import torch

__all__ = ["GammaPrior", "LogPrior"]


class LogPrior(abc.ABC):
    """A prior on a positive parameter ``φ``, expressed on ``u = log φ``.

    Samplers work in log space, so the density includes the Jacobian ``dφ/du = φ``:
    ``log p_u(u) = log p_φ(e^u) + u``.
    """

    @abc.abstractmethod
    def log_density(self, u: torch.Tensor) -> torch.Tensor:
        """``log p_u(u)`` up to a constant, elementwise (same shape as ``u``)."""

    @abc.abstractmethod
    def grad(self, u: torch.Tensor) -> torch.Tensor:
        """``d log p_u / du``, elementwise."""


class GammaPrior(LogPrior):
    """``φ ~ Gamma(shape a, rate b)``: on ``u = log φ``, ``log p(u) = a u − b e^u + const``.

    Filippone & Engler (2015), Fig. 1, put a Gamma prior on each
    covariance parameter; the default ``Gamma(1, 1)`` (an exponential with mean 1) is
    vague on standardised data. The log-space density is log-concave for every
    ``a, b > 0`` (its second derivative is ``−b e^u``).

    Parameters
    ----------
    shape, rate
        ``a > 0`` and ``b > 0``.
    """

    def __init__(self, shape: float = 1.0, rate: float = 1.0) -> None:
        for name, value in (("shape", shape), ("rate", rate)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a positive number, got {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        self.shape, self.rate = float(shape), float(rate)

    def log_density(self, u: torch.Tensor) -> torch.Tensor:
        """``a u − b e^u + a log b − log Γ(a)`` (normalised in ``u``)."""
        const = self.shape * math.log(self.rate) - math.lgamma(self.shape)
        return self.shape * u - self.rate * torch.exp(u) + const

    def grad(self, u: torch.Tensor) -> torch.Tensor:
        """``a − b e^u``."""
        return self.shape - self.rate * torch.exp(u)

    def __repr__(self) -> str:
        return f"GammaPrior(shape={self.shape:g}, rate={self.rate:g})"
