"""The Laplace objective and step halving along an inexact Newton direction.

Both work on the interpolated pair ``h = P (f − μ)``, ``a = K⁻¹ (f − μ)``, so evaluating
``Ψ`` at a trial point needs no product with ``K``.
"""

from __future__ import annotations

import torch

from .problem import LaplaceProblem

__all__ = ["MAX_HALVINGS", "halve_step", "laplace_objective"]

#: Step halvings tried before declaring that the inexact Newton direction is no ascent.
MAX_HALVINGS = 30


def laplace_objective(problem: LaplaceProblem, h: torch.Tensor, a: torch.Tensor) -> float:
    """``Ψ = Σ log p(y | μ + h) − ½ aᵀ h`` (``aᵀh = (f − μ)ᵀ K⁻¹ (f − μ)``).

    Parameters
    ----------
    problem
        Likelihood, targets and prior mean.
    h, a
        ``P (f − μ)`` and ``K⁻¹ (f − μ)``, shape ``(N,)``.

    Returns
    -------
    float
        The Laplace objective.
    """
    lik = problem.likelihood
    ll = lik.log_likelihood(lik.unflatten(problem.mean + h), problem.y).sum()
    return float(ll) - 0.5 * float(a @ h)


def halve_step(
    problem: LaplaceProblem,
    h: torch.Tensor,
    a: torch.Tensor,
    psi: float,
    h_new: torch.Tensor,
    a_new: torch.Tensor,
    *,
    full_step: bool = False,
) -> tuple[float, torch.Tensor, torch.Tensor, float]:
    """Step halving on ``Ψ`` from ``(h, a)`` towards ``(h_new, a_new)``.

    Takes the first step size ``1, ½, ¼, …`` (at most :data:`MAX_HALVINGS` tries) at
    which ``Ψ`` does not decrease by more than rounding (``100 ε (1 + |Ψ|)``).

    Parameters
    ----------
    problem
        Likelihood, targets and prior mean.
    h, a
        The current mode's ``P (f − μ)`` and ``K⁻¹ (f − μ)``, shape ``(N,)``.
    psi
        ``Ψ`` at ``(h, a)``.
    h_new, a_new
        The end of the full (inexact) Newton step, shape ``(N,)``.
    full_step
        Take the full step without a search (a Gaussian likelihood: one Newton step is
        the exact posterior mean, as in IterGP).

    Returns
    -------
    tuple
        ``(step, h_try, a_try, psi_try)``; ``step = 0`` and the unchanged
        ``(h, a, psi)`` when no step ascends.
    """
    if full_step:
        return 1.0, h_new, a_new, laplace_objective(problem, h_new, a_new)
    slack = 100.0 * torch.finfo(h.dtype).eps * (1.0 + abs(psi))
    step = 1.0
    for _ in range(MAX_HALVINGS):
        h_try = h + step * (h_new - h)
        a_try = a + step * (a_new - a)
        psi_try = laplace_objective(problem, h_try, a_try)
        if psi_try >= psi - slack:
            return step, h_try, a_try, psi_try
        step *= 0.5
    return 0.0, h, a, psi
