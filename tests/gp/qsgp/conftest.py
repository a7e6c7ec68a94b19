"""Small problems shared by the QSGP tests (fixtures `problem` and `model`)."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn

F64 = torch.float64


def problem(likelihood: str = "gaussian", n: int = 120, d: int = 2, seed: int = 0):
    """Inputs ``(n, d)`` and targets for ``likelihood`` (a smooth latent function)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=F64)
    f = torch.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1:].sum(1)
    if likelihood == "gaussian":
        return X, f + 0.1 * torch.randn(n, generator=g, dtype=F64)
    if likelihood == "bernoulli":
        return X, (torch.rand(n, generator=g, dtype=F64) < torch.sigmoid(2 * f)).to(F64)
    return X, torch.poisson(torch.exp(0.5 * f), generator=g)


def likelihood_for(name: str):
    return {
        "gaussian": pn.likelihoods.Gaussian(0.1),
        "bernoulli": pn.likelihoods.Bernoulli(),
        "poisson": pn.likelihoods.Poisson(),
    }[name]


def model(
    likelihood: str = "gaussian",
    m: int = 30,
    covariance: str = "chevron",
    *,
    X: torch.Tensor,
    randomise: bool = True,
    seed: int = 1,
    **kwargs,
) -> pn.gp.QSGP:
    """A QSGP on ``X`` whose ``q`` is moved away from the prior (a generic point)."""
    kwargs.setdefault("rank", 4)
    q = pn.gp.QSGP(
        pn.kernels.RBF(lengthscale=1.0), likelihood_for(likelihood), m, covariance=covariance,
        generator=torch.Generator().manual_seed(seed), **kwargs,
    )  # fmt: skip
    q.build(X)
    if randomise:
        g = torch.Generator().manual_seed(seed + 100)
        with torch.no_grad():
            q.mean_weights.copy_(0.3 * torch.randn(m, generator=g, dtype=F64))
            q.cov.log_diag.copy_(0.2 * torch.randn(m, generator=g, dtype=F64) - 0.5)
            q.cov.lower.copy_(0.1 * torch.randn(*q.cov.lower.shape, generator=g, dtype=F64))
    return q


@pytest.fixture(name="problem")
def _problem_fixture():
    """:func:`problem`."""
    return problem


@pytest.fixture(name="model")
def _model_fixture():
    """:func:`model`."""
    return model
