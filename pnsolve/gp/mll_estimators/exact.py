"""Exact marginal-likelihood gradient by Cholesky and autograd (the reference)."""

from __future__ import annotations

import torch

from ..exact import ExactGP
from ._problem import Problem
from .base import GradientEstimator

__all__ = ["ExactEstimator"]


class ExactEstimator(GradientEstimator):
    """Exact gradient of ``−log p(y | θ)``: one ``O(n³)`` Cholesky with autograd.

    ``targets`` returns ``y[:, None]`` (so a training loop may still solve for
    ``v_y = K̂⁻¹ y``, e.g. for :meth:`posterior_mean`), and ``backward`` ignores the
    solutions. Builds the dense ``n × n`` kernel matrix and its autograd graph: the
    reference for the stochastic estimators at small ``n`` (a few thousand at most).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> from pnsolve.gp.mll_estimators import ExactEstimator
    >>> X = torch.rand(30, 2, dtype=torch.float64); y = torch.sin(4 * X[:, 0])
    >>> k = pn.kernels.Matern(1.5, lengthscale=torch.tensor([0.3, 0.4], dtype=torch.float64))
    >>> ExactEstimator().backward(k, X, 0.1, y, None)
    >>> k.raw_lengthscale.grad.shape
    torch.Size([2])
    """

    num_probes = 0
    needs_solves = False

    def _targets(self, problem: Problem) -> torch.Tensor:
        return problem.y.detach().unsqueeze(-1)

    def _backward(self, problem: Problem, solutions: torch.Tensor | None) -> None:
        kernel, X, noise, y = problem
        # differentiate w.r.t. a detached copy of noise, then push that gradient through
        # the caller's noise graph with retain_graph (as the stochastic estimators do)
        leaf = noise
        if isinstance(noise, torch.Tensor):
            leaf = noise.detach().requires_grad_(noise.requires_grad)
        with torch.enable_grad():
            loss = -ExactGP(kernel, noise=noise_float(noise)).log_marginal_likelihood(
                X, y.detach(), noise=leaf
            )
            loss.backward()
        if isinstance(noise, torch.Tensor) and noise.requires_grad:
            assert isinstance(leaf, torch.Tensor) and leaf.grad is not None
            torch.autograd.backward(noise, leaf.grad, retain_graph=True)


def noise_float(noise: float | torch.Tensor) -> float:
    """The noise variance as a Python float."""
    return float(noise.detach()) if isinstance(noise, torch.Tensor) else float(noise)
