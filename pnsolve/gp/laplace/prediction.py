"""Predictions of a Laplace fit: the latent posterior from a belief, and the likelihood's.

Pure queries: nothing here changes the fit.
"""

from __future__ import annotations

import torch

from ...kernels.kernel import Kernel
from ..belief_posterior import belief_posterior
from ..posterior import GaussianPosterior
from .problem import LaplaceProblem, latent_kernel
from .state import LaplaceState

__all__ = ["latent_posterior", "predict_from_posterior"]


def latent_posterior(
    state: LaplaceState,
    kernel: Kernel,
    Xs: torch.Tensor,
    *,
    weights: torch.Tensor | None = None,
    backend: str = "auto",
) -> GaussianPosterior:
    """Latent posterior at ``Xs``: mean ``μ + k(Xs, X) a``, the belief's combined covariance.

    Parameters
    ----------
    state
        A state of the Newton loop: its problem (training inputs, projector, prior
        mean), its Newton system ``A`` and the inner solver's belief about it (the root
        ``V`` of ``C_i = V Vᵀ`` gives ``k − k V Vᵀ k``; ``A`` the on-demand exact variance).
    kernel
        Prior covariance of each latent function.
    Xs
        Checked test inputs, shape ``(t, d)``.
    weights
        ``a`` in the mean, shape ``(N,)``, e.g. ``state.weights`` (the mode); default
        the belief's mean (the current step's weights while the inner loop runs).
    backend
        Kernel-matrix backend of the cross-covariance.

    Returns
    -------
    GaussianPosterior
        ``mean``/``var`` of shape ``(t,)``, ``(t, C)`` for ``C > 1`` latent functions;
        ``calibrated`` is the belief's (a non-adaptive inner policy, no recycled
        buffer of unknown provenance replayed).
    """
    problem, belief = state.problem, state.belief
    C = problem.likelihood.num_latent
    prior_var = kernel.diag(Xs).repeat(C)

    def prior_cov() -> torch.Tensor:
        k = kernel(Xs)
        return k if C == 1 else torch.block_diag(*([k] * C))

    return belief_posterior(
        cross=latent_kernel(kernel, Xs, problem.X, C, backend),
        prior_var=prior_var,
        prior_cov=prior_cov,
        weights=belief.mean if weights is None else weights,
        V=belief.V,
        offset=problem.mean,
        A=state.A,
        num_latent=C,
        projector=problem.projector,
        calibrated=belief.calibrated,
    )


def predict_from_posterior(
    problem: LaplaceProblem,
    kernel: Kernel,
    Xs: torch.Tensor,
    post: GaussianPosterior,
    method: str = "probit",
    num_samples: int = 1000,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The likelihood's prediction from the latent marginals ``post`` at ``Xs``.

    Negative variances at rounding level (``100 eps`` of the kernel's prior variance) are
    clamped to zero before :meth:`~pnsolve.likelihoods.Likelihood.predict`; larger ones
    raise.

    Parameters
    ----------
    problem
        The fit's data (its likelihood predicts).
    kernel
        Prior covariance (its scale sets the tolerance for negative variances).
    Xs
        Checked test inputs, shape ``(t, d)``.
    post
        The latent posterior at ``Xs``.
    method, num_samples, generator
        As in :meth:`~pnsolve.gp.IterNCGP.predict_proba`.

    Returns
    -------
    torch.Tensor
        As from :meth:`~pnsolve.gp.IterNCGP.predict_proba`.

    Raises
    ------
    ArithmeticError
        If a latent variance is negative beyond rounding (the belief does not match the
        kernel, e.g. it was changed after the fit).
    """
    var = post.var
    with torch.no_grad():
        scale = float(kernel.diag(Xs[:1])[0])
    floor = -100.0 * torch.finfo(var.dtype).eps * scale
    if bool((var < floor).any()):
        raise ArithmeticError(
            f"negative latent variance {float(var.min()):.3e}: the belief is inconsistent "
            "with the kernel (was the kernel changed after fit?)"
        )
    return problem.likelihood.predict(
        post.mean,
        var.clamp_min(0.0),  # only rounding-level negatives reach here
        method=method,
        num_samples=num_samples,
        generator=generator,
    )
