"""Predictions with trained hyperparameters: exact (Cholesky) or pathwise samples."""

from __future__ import annotations

import torch

from ...iterative import KernelSystem
from ...kernels.random_features import check_spectral_kernel
from ..exact import ExactGP
from ..mll_estimators import PathwiseEstimator
from .config import TrainingConfig
from .record import TrainingResult
from .run import make_solver

__all__ = ["predictive"]


def predictive(
    result: TrainingResult,
    X: torch.Tensor,
    y: torch.Tensor,
    Xs: torch.Tensor,
    *,
    method: str = "cholesky",
    config: TrainingConfig | None = None,
    num_samples: int = 64,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Predictive mean and variance of ``y`` at ``Xs`` under the trained hyperparameters.

    Parameters
    ----------
    result
        From :func:`~pnsolve.gp.training.train_hyperparameters`.
    X, y
        The training data of the run, ``(n, d)`` and ``(n,)``.
    Xs
        Test inputs ``(t, d)``.
    method
        ``"cholesky"``: the exact GP posterior (``O(n³)``, the reference).
        ``"pathwise"``: one batched solve of ``[y, ξ_1..ξ_s]`` with ``config``'s
        solver (CG for the ``"cholesky"`` and ``"sgd"`` configurations; to its
        tolerance, no epoch budget); the mean is ``μ + k(Xs, X) v_y`` and the variance
        the sample variance of ``s`` pathwise posterior samples around it
        (matrix-free, ``O(n)`` memory per test point).
    config
        Solver settings for ``"pathwise"`` (default :class:`TrainingConfig` with CG).
    num_samples
        Posterior samples ``s`` for ``"pathwise"``.
    generator
        Draws of the pathwise samples (required for ``"pathwise"``).

    Returns
    -------
    mean, var : torch.Tensor
        Shape ``(t,)``; ``var`` includes the noise variance ``σ²``.
    """
    if method == "cholesky":
        with torch.no_grad():
            gp = ExactGP(result.kernel, noise=result.noise, mean=result.mean).fit(X, y)
            post = gp.posterior(Xs)
            return post.mean, post.var + result.noise
    if method != "pathwise":
        raise ValueError(f"method must be 'cholesky' or 'pathwise', got {method!r}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    config = TrainingConfig(solver="cg") if config is None else config
    if config.solver in ("cholesky", "sgd"):
        # SGD to a tolerance without a tuned learning rate is slow: predictions use CG
        config = TrainingConfig(
            solver="cg", tol=config.tol, num_features=config.num_features, backend=config.backend
        )
    kernel = check_spectral_kernel(result.kernel, "predictive(method='pathwise')")
    est = PathwiseEstimator(num_samples, config.num_features, generator=generator)
    noise = torch.tensor(result.noise, dtype=X.dtype, device=X.device)
    yc = y - result.mean
    with torch.no_grad():
        B = est.targets(kernel, X, noise, yc)
        solver = make_solver(config, X.shape[0])
        assert solver is not None  # config.solver is "cg" or "ap" here
        system = KernelSystem(kernel, X, noise, backend=config.backend)
        V, _ = solver.solve(system, B, None, generator=generator)
        samples = est.posterior_samples(kernel, X, noise, yc, V, Xs)
        latent = est.posterior_mean(kernel, X, noise, yc, V, Xs)
        # the samples' expectation is the latent mean k(Xs, X) v_y: average around it
        var = (samples - latent.unsqueeze(-1)).square().mean(dim=1) + result.noise
    return result.mean + latent, var
