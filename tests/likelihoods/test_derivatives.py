"""Gradients and Hessians of every likelihood against torch.autograd; W is PSD; W⁻¹ W = I.

All claims are exact (deterministic tests): the closed-form derivatives must match
autograd of ``log_likelihood`` up to rounding, with tolerances from ``pnsolve.testing``.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.likelihoods import Bernoulli, Gaussian, Poisson, Softmax
from pnsolve.testing import exact_tol

DTYPES = [torch.float64, torch.float32]
N = 12
C = 4


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _problem(lik: pn.likelihoods.Likelihood, dtype: torch.dtype, seed: int = 0):
    """Latent values and targets drawn from the likelihood's own model."""
    g = _gen(seed)
    if isinstance(lik, Softmax):
        f = 1.5 * torch.randn(N, lik.num_classes, generator=g, dtype=dtype)
        y = torch.multinomial(torch.softmax(f.double(), 1), 1, generator=g).squeeze(1)
        return f, y
    f = 1.5 * torch.randn(N, generator=g, dtype=dtype)
    if isinstance(lik, Bernoulli):
        y = torch.randint(0, 2, (N,), generator=g)
    elif isinstance(lik, Poisson):
        y = torch.poisson(torch.exp(f.double()), generator=g).long()
    else:
        y = f + torch.randn(N, generator=g, dtype=dtype)
    return f, y


LIKELIHOODS = [
    pytest.param(Gaussian(noise=0.3), id="gaussian"),
    pytest.param(Bernoulli("logit"), id="bernoulli-logit"),
    pytest.param(Bernoulli("probit"), id="bernoulli-probit"),
    pytest.param(Poisson(), id="poisson"),
    pytest.param(Softmax(C), id="softmax"),
]


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, n: int = 1) -> None:
    scale = max(float(b.abs().max()), 1.0)
    err = float((a - b).abs().max())
    assert err <= exact_tol(dtype, n) * scale, f"max error {err:.3e}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lik", LIKELIHOODS)
def test_gradient_matches_autograd(lik, dtype):
    f, y = _problem(lik, dtype)
    f_req = f.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(lik.log_likelihood(f_req, y).sum(), f_req)
    g = lik.gradient(f, y)
    assert g.shape == f.shape and g.dtype == dtype
    _close(g, auto, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lik", LIKELIHOODS)
def test_hessian_matches_autograd_on_flat_class_major_vector(lik, dtype):
    f, y = _problem(lik, dtype)

    def total(flat: torch.Tensor) -> torch.Tensor:
        return lik.log_likelihood(lik.unflatten(flat), y).sum()

    H = torch.autograd.functional.hessian(total, lik.flatten(f))
    W = lik.hessian(f, y)
    m = lik.num_latent * N
    assert W.shape == (m, m) and W.dtype == dtype and W.is_symmetric and W.is_psd
    _close(W.to_dense(), -H, dtype, m)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lik", LIKELIHOODS)
def test_hessian_is_psd(lik, dtype):
    f, y = _problem(lik, dtype, seed=1)
    W = lik.hessian(f, y).to_dense().double()
    lam = torch.linalg.eigvalsh(W)
    assert float(lam.min()) >= -exact_tol(dtype, W.shape[0]) * float(lam.max())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lik", LIKELIHOODS[:4])
def test_noise_inverts_hessian(lik, dtype):
    f, y = _problem(lik, dtype, seed=2)
    W, Winv = lik.hessian(f, y), lik.noise(f, y)
    assert Winv.is_symmetric and Winv.is_psd and Winv.dtype == dtype
    X = torch.randn(N, 3, generator=_gen(3), dtype=dtype)
    _close(Winv @ (W @ X), X, dtype)
    _close(W @ (Winv @ X), X, dtype)


def test_gaussian_newton_pseudo_targets_are_y():
    lik = Gaussian(noise=0.25)
    f, y = _problem(lik, torch.float64)
    pseudo = f + lik.noise(f, y) @ lik.gradient(f, y)
    _close(pseudo, y, torch.float64)
    ll = lik.log_likelihood(f, y)
    ref = torch.distributions.Normal(f, 0.5).log_prob(y)
    _close(ll, ref, torch.float64)


def test_gaussian_noise_tensor_keeps_autograd():
    s2 = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    lik = Gaussian(noise=s2)
    f, y = _problem(lik, torch.float64)
    lik.log_likelihood(f, y).sum().backward()
    expected = (-0.5 / s2 + 0.5 * (y - f).square() / s2**2).sum()
    _close(s2.grad, expected.detach(), torch.float64)


def test_poisson_log_likelihood_matches_torch_distribution():
    lik = Poisson()
    f, y = _problem(lik, torch.float64)
    ref = torch.distributions.Poisson(torch.exp(f)).log_prob(y.double())
    _close(lik.log_likelihood(f, y), ref, torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_curvature_floor_keeps_noise_finite(dtype):
    floor = pn.likelihoods.curvature_floor(dtype)
    assert floor == pytest.approx(torch.finfo(dtype).eps ** 0.5, rel=torch.finfo(dtype).eps)
    big = torch.tensor([-1e3, -50.0, 0.0, 50.0, 80.0], dtype=dtype)
    y = torch.tensor([1, 1, 0, 0, 0])
    for lik in (Bernoulli("logit"), Bernoulli("probit"), Poisson()):
        W = lik.hessian(big, y).diagonal()
        Winv = lik.noise(big, y).diagonal()
        assert bool(torch.isfinite(Winv).all()) and float(Winv.max()) <= 1 / floor
        assert float(W.min()) >= floor
        assert bool(torch.isfinite(lik.gradient(big, y)).all())
        assert bool(torch.isfinite(lik.log_likelihood(big, y)).all())
    # probit: in the confidently wrong tail W → 1 and g = φ(z)/Φ(z) ~ −z − 1/z + 2/z³ − 10/z⁵
    probit = Bernoulli("probit")
    W = probit.hessian(big, y).diagonal()
    assert float(W.max()) <= 1.0
    z = big[:1]
    _close(probit.gradient(z, y[:1]), -z - 1 / z + 2 / z**3 - 10 / z**5, dtype)
    # softmax: a class probability that underflows is floored in W⁺ only
    f = torch.tensor([[0.0, -1e3, 5.0]], dtype=dtype)
    Wp = Softmax(3).noise(f, torch.tensor([2]))
    assert bool(torch.isfinite(Wp.to_dense()).all())
