"""MAP of the log-hyperparameters on a subset and the Laplace preconditioner ``M``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..._core import random as rnd
from ..._core.precision import full_float32
from ..._core.validation import check_positive_int, require_generator
from .exact import exact_log_marginal
from .hyperparameters import LogHyperparameters

__all__ = ["LaplaceFit", "laplace_preconditioner", "log_posterior", "maximise"]


@full_float32
def log_posterior(
    params: LogHyperparameters,
    X: torch.Tensor,
    y: torch.Tensor,
    theta: torch.Tensor,
    *,
    grad: bool = False,
) -> tuple[float, torch.Tensor | None]:
    """``log p(y | X, θ) + log p(θ)`` (exact, Cholesky) and optionally its gradient."""
    value, g = exact_log_marginal(params, X, y, theta, grad=grad)
    value += float(params.log_prior(theta))
    if g is not None:
        g = g + params.log_prior_grad(theta)
    return value, g


@full_float32
def maximise(
    fn: Callable[[torch.Tensor], tuple[float, torch.Tensor | None]], start: torch.Tensor
) -> torch.Tensor:
    """``argmax`` of a smooth ``fn(θ) → (value, gradient)`` by L-BFGS from ``start``.

    ``fn`` may return ``(-inf, None)`` where it is undefined (e.g. ``K̂`` not positive
    definite); the line search then backs off. SciPy iterates on the host; ``fn`` sees
    and the result is on ``start``'s device (float64).

    Raises
    ------
    ArithmeticError
        If the value at the end is not finite.
    """
    from scipy.optimize import minimize  # imported on use: importing pnsolve stays light

    # host round trip: SciPy's L-BFGS iterates on NumPy arrays; fn works on start's device
    device = start.device

    def objective(u: np.ndarray) -> tuple[float, np.ndarray]:
        value, g = fn(torch.from_numpy(u).to(device))
        if g is None or not math.isfinite(value):
            return math.inf, np.zeros_like(u)
        return -value, -g.detach().cpu().numpy()

    res = minimize(objective, start.detach().cpu().double().numpy(), jac=True, method="L-BFGS-B")
    theta = torch.from_numpy(res.x).to(dtype=torch.float64, device=device)
    if not math.isfinite(fn(theta)[0]):
        raise ArithmeticError(f"the maximisation failed: {res.message}")
    return theta


@dataclass(frozen=True)
class LaplaceFit:
    """The MAP of ``θ`` on a subset and the curvature there.

    Attributes
    ----------
    theta
        The MAP, shape ``(p,)``.
    M
        ``(−∇² log p(θ | y_S))⁻¹`` at the MAP, SPD ``(p, p)``: SGLD's preconditioner and
        the covariance the chains start from.
    subset
        Indices of the subset used, shape ``(m,)``.

    Every tensor is on the data's device (``θ`` and ``M`` in float64).
    log_posterior
        The log posterior at the MAP on the subset.
    """

    theta: torch.Tensor
    M: torch.Tensor
    subset: torch.Tensor
    log_posterior: float


def laplace_preconditioner(
    params: LogHyperparameters,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    subset: int = 500,
    generator: torch.Generator,
    theta0: torch.Tensor | None = None,
) -> LaplaceFit:
    """MAP on a random subset and the inverse negative Hessian there.

    Filippone & Engler (2015), §5.1, set SGLD's preconditioner to the inverse of the
    negative Hessian of the log posterior at its mode "computed on a subset of five
    hundred input vectors, as this is a cheap way to obtain a rough idea of the
    covariance structure". The MAP is found by L-BFGS on the exact (Cholesky) log
    posterior of the subset; the Hessian by
    central differences of its exact gradient (``p`` is small), symmetrised.

    Parameters
    ----------
    params
        The model's :class:`LogHyperparameters` (priors included).
    X, y
        All inputs ``(n, d)`` and targets ``(n,)``.
    subset
        Subset size ``m`` (Filippone & Engler 2015: 500; all points if ``n ≤ m``).
    generator
        Draws the subset.
    theta0
        Starting point of the optimisation (default ``params.initial()``).

    Returns
    -------
    LaplaceFit

    Raises
    ------
    ArithmeticError
        If the optimiser fails or the Hessian is not negative definite at its end.
    """
    generator = require_generator(generator)
    m = min(check_positive_int(subset, "subset"), X.shape[0])
    idx = rnd.randperm(X.shape[0], generator=generator, device=X.device)[:m].sort().values
    Xs, ys = X[idx], y[idx]
    start = (params.initial() if theta0 is None else params.check(theta0)).to(X.device)

    theta = maximise(lambda t: log_posterior(params, Xs, ys, t, grad=True), start)
    value, _ = log_posterior(params, Xs, ys, theta)
    H = _hessian(params, Xs, ys, theta)
    M = torch.linalg.inv(-H)
    M = 0.5 * (M + M.mT)
    if not bool((torch.linalg.eigvalsh(M) > 0).all()):
        raise ArithmeticError(
            f"the log posterior's Hessian at the subset MAP is not negative definite "
            f"(eigenvalues {torch.linalg.eigvalsh(-H).tolist()}); the mode was not found"
        )
    return LaplaceFit(theta, M, idx, value)


def _hessian(
    params: LogHyperparameters, X: torch.Tensor, y: torch.Tensor, theta: torch.Tensor
) -> torch.Tensor:
    """Central differences of the exact gradient, symmetrised, shape ``(p, p)``."""
    p = theta.shape[0]
    h = torch.finfo(torch.float64).eps ** (1 / 3)  # balances O(h²) truncation and eps/h
    H = theta.new_empty(p, p, dtype=torch.float64)
    for j in range(p):
        e = theta.new_zeros(p, dtype=torch.float64)
        e[j] = h
        _, gp = log_posterior(params, X, y, theta + e, grad=True)
        _, gm = log_posterior(params, X, y, theta - e, grad=True)
        if gp is None or gm is None:
            raise ArithmeticError("K̂ lost positive definiteness next to the MAP")
        H[:, j] = (gp - gm) / (2 * h)
    return 0.5 * (H + H.mT)
