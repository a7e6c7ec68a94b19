"""Random Fourier features of the spectral mixture, cosine and constant kernels and of
sums, products and scalings: unbiased for the kernel, differentiable, used by QSGP and
pathwise sampling; clear refusals for kernels without them."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels import RandomFourierFeatures
from pnsolve.testing import statistical_threshold

F64 = torch.float64
K = pn.kernels
M = 20_000


def _sm(d: int = 2) -> pn.kernels.Kernel:
    return K.SpectralMixture(
        2,
        weights=torch.tensor([0.7, 0.4], dtype=F64),
        means=torch.tensor([[0.3, 0.5], [0.8, 0.1]], dtype=F64)[:, :d],
        variances=torch.tensor([[0.05, 0.1], [0.02, 0.2]], dtype=F64)[:, :d],
    )


CASES = {
    "spectral-mixture": _sm,
    "sum": lambda: K.RBF(0.6) + K.Matern(nu=1.5, lengthscale=0.9, outputscale=0.5),
    "product": lambda: K.RBF(0.7, outputscale=1.3) * _sm(),
    "cosine-constant": lambda: (
        2.0 * K.Cosine(torch.tensor([1.3, 2.1], dtype=F64)) + K.Constant(0.4)
    ),
    "nested": lambda: (
        K.Constant(1.5) * K.RationalQuadratic(0.8, 1.2)
        + K.RBF(0.5, active_dims=[1]) * K.Cosine(0.9, active_dims=[0])
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_features_are_unbiased_for_the_kernel(name):
    """E[φ(x)ᵀφ(x')] = k(x, x'). Each feature j gives an independent term
    ``t_j = m φ_j(x) φ_j(x')``, and ``φᵀφ`` is their mean; the terms of a sum's parts
    have different laws, so the standard error is ``√(Σ_p m_p s_p²) / m`` with ``s_p`` the
    sample sd within part ``p``. Per entry ``|error| ≤ z · se`` with ``z`` for a false
    alarm of 1e-3 over the 36 entries (Bonferroni); the normal approximation holds for
    thousands of bounded terms (CLT)."""
    k = CASES[name]()
    X = torch.rand(6, 2, dtype=F64, generator=torch.Generator().manual_seed(1)) * 2
    f = RandomFourierFeatures(k, M, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
    with torch.no_grad():
        Phi = f(X)
        terms = M * Phi[:, None, :] * Phi[None, :, :]  # (6, 6, m)
        est = terms.mean(-1)
        base = f.base_frequencies
        groups = base[:, 0].round() if isinstance(k, K.Sum) else torch.zeros(M, dtype=F64)
        var = sum(
            terms[..., groups == g].var(-1) * int((groups == g).sum()) for g in groups.unique()
        )
        se = var.sqrt() / M
        Kx = k(X)
    z = statistical_threshold(1e-3 / 36)
    assert bool(((est - Kx).abs() <= z * se + 1e-12).all()), float(((est - Kx).abs() / se).max())


def test_features_follow_and_differentiate_the_hyperparameters():
    k = K.RBF(0.6) + _sm()
    X = torch.rand(5, 2, dtype=F64, generator=torch.Generator().manual_seed(3))
    f = RandomFourierFeatures(k, 64, 2, generator=torch.Generator().manual_seed(4), dtype=F64)
    Phi = f(X)
    Phi.pow(2).sum().backward()
    assert all(p.grad is not None for p in k.parameters())
    with torch.no_grad():
        k.parts[1].weights = torch.tensor([1.4, 0.8], dtype=F64)  # the weights doubled
        # the component of each feature is frozen; its amplitude follows the weight
        torch.testing.assert_close(f(X)[:, 32:].pow(2).sum(), 2 * Phi[:, 32:].detach().pow(2).sum())


@pytest.mark.parametrize(
    "kernel",
    [K.Periodic(), K.Linear(), K.White(0.1), K.RBF() + K.Polynomial(2), K.RBF() * K.White(0.1)],
    ids=["periodic", "linear", "white", "sum-with-polynomial", "product-with-white"],
)
def test_kernels_without_features_are_refused_by_name(kernel):
    with pytest.raises(TypeError, match="kernel must have random Fourier features"):
        RandomFourierFeatures(kernel, 8, 2, generator=torch.Generator().manual_seed(0))


def test_a_sum_needs_a_feature_per_term():
    with pytest.raises(ValueError, match="fewer than the sum's 3 terms"):
        RandomFourierFeatures(
            K.RBF() + K.Matern() + K.Cosine(), 2, 1, generator=torch.Generator().manual_seed(0)
        )


def test_pathwise_training_and_qsgp_take_an_expression():
    g = torch.Generator().manual_seed(5)
    X = torch.rand(80, 2, dtype=F64, generator=g) * 3
    y = torch.sin(2 * X[:, 0]) + 0.1 * torch.randn(80, dtype=F64, generator=g)
    k = K.RBF(0.8) * K.Cosine(torch.tensor([2.0, 3.0], dtype=F64)) + K.Matern(nu=2.5)
    cfg = pn.gp.training.TrainingConfig(estimator="pathwise", steps=3, num_probes=4)
    res = pn.gp.training.train_hyperparameters(
        X, y, cfg, kernel=k, generator=torch.Generator().manual_seed(0)
    )
    assert len(res.log) == 3 and all(math.isfinite(r.noise) for r in res.log)
    q = pn.gp.QSGP(
        _sm(), pn.likelihoods.Gaussian(0.1), 64, covariance="diagonal", batch_size=20,
        feature_batch_size=16, generator=torch.Generator().manual_seed(6),
    )  # fmt: skip
    q.fit(X, y, steps=5, generator=torch.Generator().manual_seed(7))
    post = q.posterior(X[:5])
    assert bool(torch.isfinite(post.mean).all()) and bool((post.var > 0).all())


def test_a_spectral_mixture_without_dimensions_shares_its_parameters_over_columns():
    """``SpectralMixture(Q)`` takes inputs of any ``d``: one mean and variance per component
    serve every column. Its values are those of the per-column kernel whose columns
    repeat the shared parameters, and its random features draw per column."""
    shared = K.SpectralMixture(2, weights=torch.tensor([0.6, 0.3], dtype=F64))
    assert shared.shared and shared.input_dims() == (None, 0)
    per_column = K.SpectralMixture(
        2,
        weights=torch.tensor([0.6, 0.3], dtype=F64),
        means=shared.means.detach().expand(2, 3).clone(),
        variances=shared.variances.detach().expand(2, 3).clone(),
    )
    X = torch.rand(7, 3, dtype=F64, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        torch.testing.assert_close(shared(X), per_column(X))
    f = RandomFourierFeatures(shared, 16, 3, generator=torch.Generator().manual_seed(9), dtype=F64)
    assert f.base_frequencies.shape == (16, 7) and f(X).shape == (7, 16)


def test_the_old_name_of_the_base_draws_warns_and_draws_the_same():
    k = K.RBF(ard_dims=3)
    with pytest.warns(DeprecationWarning, match="spectral_base"):
        old = k.sample_spectral_base(
            5, 3, generator=torch.Generator().manual_seed(0), dtype=F64, device="cpu"
        )
    new = k.spectral_base(5, 3, generator=torch.Generator().manual_seed(0), dtype=F64, device="cpu")
    assert torch.equal(old, new)
