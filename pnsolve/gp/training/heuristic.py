"""Initial hyperparameters for large data sets (Lin et al., 2024, App. B)."""

from __future__ import annotations

import torch

from ...kernels.matern import Matern
from .._checks import check_inputs, check_targets
from ..exact_fit import fit_exact_hyperparameters

__all__ = ["initial_hyperparameters"]


def initial_hyperparameters(
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    generator: torch.Generator,
    subset: int = 2000,
    centroids: int = 10,
    steps: int = 100,
    lr: float = 0.1,
    init_value: float = 1.0,
) -> tuple[torch.Tensor, float, float]:
    """Average of exact Matérn-3/2 ARD fits on nearest-neighbour subsets.

    The heuristic of Lin et al. (2024): pick a centroid training point uniformly at random,
    take the ``subset`` training points closest to it (Euclidean), maximise the exact
    marginal likelihood on them, repeat for ``centroids`` centroids and average the
    hyperparameters (local subsets avoid the aliasing bias of random subsets).

    Parameters
    ----------
    X, y
        Training inputs ``(n, d)`` and (centred) targets ``(n,)``.
    generator
        Draws the centroids.
    subset
        Points per subset (Lin et al.: 10 000; capped at ``n``).
    centroids
        Number of subsets.
    steps, lr
        Adam steps and learning rate of each exact fit (started at ``init_value``).
    init_value
        Start value of every hyperparameter of each exact fit.

    Returns
    -------
    lengthscale : torch.Tensor
        Shape ``(d,)``.
    outputscale, noise : float
    """
    X = check_inputs(X, "X")
    y = check_targets(y, X)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    n, d = X.shape
    m = min(int(subset), n)
    ls, os_, noise = [], [], []
    for _ in range(int(centroids)):
        c = int(torch.randint(n, (1,), generator=generator, device=generator.device))
        dist = torch.cdist(X[c : c + 1], X).squeeze(0)
        idx = torch.topk(dist, m, largest=False).indices
        kernel = Matern(
            nu=1.5,
            lengthscale=torch.full((d,), init_value, dtype=X.dtype, device=X.device),
            outputscale=torch.tensor(init_value, dtype=X.dtype, device=X.device),
        )
        fit = fit_exact_hyperparameters(
            kernel, X[idx], y[idx] - y[idx].mean(), noise=init_value, steps=steps, lr=lr
        )
        ls.append(fit.kernel.lengthscale.detach().reshape(d))
        os_.append(float(fit.kernel.outputscale.detach()))
        noise.append(fit.noise)
    return torch.stack(ls).mean(0), sum(os_) / len(os_), sum(noise) / len(noise)
