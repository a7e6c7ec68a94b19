"""Posterior predictive averaged over hyperparameter samples (Filippone & Engler 2015, eqs. 2–3)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..._core.precision import full_float32
from ..._core.validation import check_positive_int
from ...policies.cg import CG
from ...stopping.criteria import MaxIterations, ResidualNorm
from ..exact import ExactGP
from ..itergp import IterGP
from .hyperparameters import LogHyperparameters
from .map_estimate import maximise

__all__ = [
    "PREDICTIVE_METHODS",
    "MixturePredictive",
    "mixture_predictive",
    "type_ii_maximum_likelihood",
]

#: ``"exact"``: Cholesky per sample; ``"itergp"``: CG-policy IterGP per sample
#: (matrix-free, for ``n`` beyond Cholesky); ``"auto"``: exact up to 5000 points.
PREDICTIVE_METHODS = ("auto", "exact", "itergp")
_EXACT_UP_TO = 5000


@dataclass(frozen=True)
class MixturePredictive:
    """The predictive ``p(y* | y) ≈ (1/S) Σ_s N(y*; m_s, v_s)`` over ``S`` samples of ``θ``.

    Attributes
    ----------
    means, variances
        Per-sample predictive means and variances of ``y*`` (noise included), ``(S, t)``.
    """

    means: torch.Tensor
    variances: torch.Tensor

    @property
    def mean(self) -> torch.Tensor:
        """Mixture mean, shape ``(t,)``."""
        return self.means.mean(0)

    @property
    def var(self) -> torch.Tensor:
        """Mixture variance ``E[v_s + m_s²] − mean²``, shape ``(t,)``."""
        return (self.variances + self.means**2).mean(0) - self.mean**2

    def log_likelihood(self, y_test: torch.Tensor) -> float:
        """Average test log density ``(1/t) Σ_j log (1/S) Σ_s N(y*_j; m_s, v_s)``."""
        if y_test.shape != self.means.shape[1:]:
            raise ValueError(f"y_test must have shape {tuple(self.means.shape[1:])}")
        log_n = -0.5 * (
            torch.log(2 * math.pi * self.variances) + (y_test - self.means) ** 2 / self.variances
        )
        return float((torch.logsumexp(log_n, dim=0) - math.log(self.means.shape[0])).mean())


@full_float32
def mixture_predictive(
    params: LogHyperparameters,
    thetas: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    Xs: torch.Tensor,
    *,
    max_samples: int = 50,
    method: str = "auto",
    iterations: int = 200,
    rtol: float = 1e-6,
) -> MixturePredictive:
    """The Monte Carlo predictive of Filippone & Engler (2015), eq. 3, over hyperparameter samples.

    Parameters
    ----------
    params
        The model (maps ``θ`` to kernel and noise).
    thetas
        Samples of ``θ``, shape ``(S, p)`` or ``(chains, draws, p)`` (pooled); thinned
        evenly to at most ``max_samples``.
    X, y, Xs
        Training inputs ``(n, d)``, targets ``(n,)`` and test inputs ``(t, d)``; the
        samples are moved to their device.
    max_samples
        Largest number of ``θ``'s used (each costs one GP fit).
    method
        ``"exact"`` (Cholesky), ``"itergp"`` (IterGP with the CG policy: at most
        ``iterations`` products or relative residual ``rtol``; matrix-free) or
        ``"auto"`` (exact up to 5000 training points).
    iterations, rtol
        IterGP's budget and residual tolerance per sample.

    Returns
    -------
    MixturePredictive
        Predictive of ``y*`` (the noise variance ``λ`` of each sample is included).
    """
    if method not in PREDICTIVE_METHODS:
        raise ValueError(f"method must be one of {PREDICTIVE_METHODS}, got {method!r}")
    thetas = torch.as_tensor(thetas, dtype=torch.float64, device=X.device).reshape(-1, params.dim)
    if thetas.shape[0] == 0:
        raise ValueError("thetas holds no samples")
    S = min(thetas.shape[0], check_positive_int(max_samples, "max_samples"))
    picks = torch.linspace(0, thetas.shape[0] - 1, S, device=X.device).round().long()
    exact = method == "exact" or (method == "auto" and X.shape[0] <= _EXACT_UP_TO)
    means, variances = [], []
    for theta in thetas[picks]:
        kernel, noise = params.kernel_at(theta), params.noise_at(theta)
        with torch.no_grad():
            if exact:
                post = ExactGP(kernel, noise).fit(X, y).posterior(Xs)
            else:
                stop = MaxIterations(iterations) | ResidualNorm(rtol=rtol)
                post = IterGP(kernel, noise, CG(), stop).fit(X, y).posterior(Xs)
            means.append(post.mean.detach())
            variances.append(post.var.detach() + noise)
    return MixturePredictive(torch.stack(means), torch.stack(variances))


def type_ii_maximum_likelihood(
    params: LogHyperparameters,
    X: torch.Tensor,
    y: torch.Tensor,
    theta0: torch.Tensor | None = None,
) -> torch.Tensor:
    """``argmax_θ log p(y | X, θ)`` (no prior) by L-BFGS on the exact likelihood, ``(p,)``.

    The point estimate the Bayesian predictive is compared with (``O(n³)`` per step).
    """
    from .exact import exact_log_marginal

    start = (params.initial() if theta0 is None else params.check(theta0)).to(X.device)
    return maximise(lambda t: exact_log_marginal(params, X, y, t, grad=True), start)
