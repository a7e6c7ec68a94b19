"""The computation-aware ELBO: against a dense implementation, the exact marginal
likelihood at ``S = I``, the bound for random actions, gradients and backends."""

from __future__ import annotations

import pytest
import torch
from cagp_data import F64, data, gen
from hypothesis import given, settings
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.gp.cagp import ActionsNotFullRankError, computation_aware_elbo
from pnsolve.kernels.backends.keops import keops_available
from pnsolve.testing import exact_tol, krylov_tol

pytestmark = pytest.mark.usefixtures("one_thread")


def dense_elbo(K: torch.Tensor, S: torch.Tensor, y: torch.Tensor, mean: float, s2: float):
    """``E_q log p(y | f) − KL(q ‖ p)`` from the definitions, by dense algebra and
    torch.distributions (``q = N(m, Σ)`` the GP posterior given ``Sᵀy``)."""
    n = K.shape[0]
    G_hat = S.mT @ K @ S + s2 * S.mT @ S
    m = mean + K @ S @ torch.linalg.solve(G_hat, S.mT @ (y - mean))
    Sigma = K - K @ S @ torch.linalg.solve(G_hat, S.mT @ K)
    Sigma = 0.5 * (Sigma + Sigma.mT)
    lik = torch.distributions.Normal(m, s2**0.5).log_prob(y).sum()
    ell = lik - Sigma.diagonal().sum() / (2 * s2)
    q = torch.distributions.MultivariateNormal(m, Sigma)
    p = torch.distributions.MultivariateNormal(torch.full((n,), mean, dtype=F64), K)
    return ell - torch.distributions.kl_divergence(q, p)


def _model(i: int, **kwargs) -> pn.gp.CaGP:
    kwargs.setdefault("backend", "dense")
    k = pn.kernels.RBF(lengthscale=0.3, outputscale=1.3)
    return pn.gp.CaGP(k, 0.05, i, mean=0.2, **kwargs)


@pytest.mark.parametrize("blocks", ["random", "kmeans"])
def test_the_elbo_equals_a_dense_implementation_of_its_definition(blocks):
    X, y = data(40)
    m = _model(7, blocks=blocks)
    m.fit(X, y, steps=0, generator=gen(1))
    S = m.pattern.dense(m.action_values)
    K = m.kernel(X).detach()
    expected = float(dense_elbo(K, S, y, 0.2, 0.05))
    cond = float(torch.linalg.cond(K))
    assert abs(m.elbo(X, y) - expected) <= krylov_tol(F64, cond) * abs(expected)


def test_general_dense_actions_match_the_definition_too():
    """The derivation holds for any full-rank S (log |SᵀS| not diagonal)."""
    X, y = data(30)
    k = pn.kernels.RBF(lengthscale=0.3)
    K = k(X).detach()
    S = torch.randn(30, 5, generator=gen(3), dtype=F64)
    yc = y - 0.2
    KS = K @ S
    gram = S.mT @ S
    value, _ = computation_aware_elbo(
        KS, S.mT @ KS, S.mT @ yc, gram, torch.linalg.slogdet(gram)[1], yc,
        torch.tensor(0.05, dtype=F64), K.diagonal().sum(),
    )  # fmt: skip
    expected = float(dense_elbo(K, S, y, 0.2, 0.05))
    assert abs(float(value) - expected) <= krylov_tol(F64, float(torch.linalg.cond(K))) * abs(
        expected
    )


def test_with_all_n_actions_of_one_point_each_it_is_the_log_marginal_likelihood():
    X, y = data(50)
    m = _model(50)
    m.fit(X, y, steps=0, generator=gen(1))
    with torch.no_grad():
        m.action_values.fill_(1.0)  # S = a permutation: the ELBO does not see the order
    exact = pn.gp.ExactGP(pn.kernels.RBF(lengthscale=0.3, outputscale=1.3), 0.05, mean=0.2)
    lml = float(exact.fit(X, y).log_marginal_likelihood())
    assert abs(m.elbo(X, y) - lml) <= exact_tol(F64, 50) * max(1.0, abs(lml)) * 1e3


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(8, 40),
    fraction=st.floats(0.1, 1.0),
    noise=st.floats(1e-3, 1.0),
    lengthscale=st.floats(0.05, 2.0),
)
def test_the_elbo_never_exceeds_the_log_marginal_likelihood(seed, n, fraction, noise, lengthscale):
    X, y = data(n, seed=seed % 1000)
    i = max(1, int(fraction * n))
    k = pn.kernels.RBF(lengthscale=lengthscale)
    m = pn.gp.CaGP(k, noise, i, backend="dense")
    m.fit(X, y, steps=0, generator=gen(seed))
    lml = float(pn.gp.ExactGP(pn.kernels.RBF(lengthscale=lengthscale), noise).fit(X, y)
                .log_marginal_likelihood())  # fmt: skip
    assert m.elbo(X, y) <= lml + krylov_tol(F64) * max(1.0, abs(lml))


def test_gradients_match_finite_differences_in_hyperparameters_and_actions():
    X, y = data(25)
    m = _model(4)
    m.fit(X, y, steps=0, generator=gen(1))

    def in_noise_and_actions(log_noise, values):
        return m._elbo(X, y, values, log_noise)[0]

    inputs = (
        m.log_noise.clone().requires_grad_(True),
        m.action_values.clone().requires_grad_(True),
    )
    assert torch.autograd.gradcheck(in_noise_and_actions, inputs, eps=1e-6, atol=1e-6, rtol=1e-5)
    # the kernel's raw parameters: central differences, one entry at a time
    value, _ = m._elbo(X, y, m.action_values, m.log_noise)
    params = list(m.kernel.parameters())
    grads = torch.autograd.grad(value, params)
    h = 1e-6
    for p, g in zip(params, grads, strict=True):
        for j in range(p.numel()):
            with torch.no_grad():
                p.view(-1)[j] += h
                up = m.elbo(X, y)
                p.view(-1)[j] -= 2 * h
                down = m.elbo(X, y)
                p.view(-1)[j] += h
            fd = (up - down) / (2 * h)
            assert abs(fd - float(g.view(-1)[j])) <= 1e-5 * max(1.0, abs(fd))


@pytest.mark.parametrize("backend", ["chunked", "auto"])
def test_matrix_free_backends_equal_the_dense_one_with_gradients(backend):
    X, y = data(70)
    values = {}
    grads = {}
    for name in ("dense", backend):
        m = _model(9, backend=name)
        m.fit(X, y, steps=0, generator=gen(1))
        v = m.action_values.clone().requires_grad_(True)
        ln = m.log_noise.clone().requires_grad_(True)
        value, _ = m._elbo(X, y, v, ln)
        grads[name] = torch.autograd.grad(value, [v, ln, *m.kernel.parameters()])
        values[name] = float(value)
    # the products agree to rounding; the i × i solves after them amplify it by up to κ(K̂)
    tol = krylov_tol(F64, float(torch.linalg.cond(m.system(X).to_dense())))
    assert abs(values[backend] - values["dense"]) <= tol * abs(values["dense"])
    for a, b in zip(grads[backend], grads["dense"], strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol * float(b.abs().max()))


def test_an_all_zero_block_is_refused_as_rank_deficient():
    X, y = data(30)
    m = _model(5)
    m.fit(X, y, steps=0, generator=gen(1))
    with torch.no_grad():
        m.action_values[m.pattern.block_of == 2] = 0.0
    with pytest.raises(ActionsNotFullRankError, match="rank deficient"):
        m.elbo(X, y)


@pytest.mark.keops
@pytest.mark.skipif(not keops_available(), reason="pykeops is not importable")
def test_the_keops_backend_equals_the_dense_one_with_gradients():
    X, y = data(90, d=3)
    values, grads = {}, {}
    for name in ("dense", "keops"):
        m = pn.gp.CaGP(pn.kernels.RBF(lengthscale=0.4), 0.05, 6, backend=name)
        m.fit(X, y, steps=0, generator=gen(1))
        v = m.action_values.clone().requires_grad_(True)
        value, _ = m._elbo(X, y, v, m.log_noise)
        grads[name] = torch.autograd.grad(value, [v, *m.kernel.parameters()])
        values[name] = float(value)
    tol = krylov_tol(F64, float(torch.linalg.cond(m.system(X).to_dense())))
    assert abs(values["keops"] - values["dense"]) <= tol * abs(values["dense"])
    for a, b in zip(grads["keops"], grads["dense"], strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol * float(b.abs().max()))


@pytest.mark.parametrize(
    "make",
    [
        lambda: pn.kernels.RBF(lengthscale=torch.tensor([0.3, 0.7], dtype=F64), outputscale=1.2),
        lambda: pn.kernels.Matern(nu=1.5, lengthscale=0.4),
        lambda: pn.kernels.Matern(nu=0.5, lengthscale=0.4),
        lambda: pn.kernels.Matern(nu=2.5, lengthscale=torch.tensor([0.5, 0.2], dtype=F64)),
        lambda: pn.kernels.RBF(lengthscale=0.3),
    ],
)
def test_the_fused_block_product_equals_the_dense_one_with_gradients(make, monkeypatch):
    """One tiled pass over the kernel entries (tiles smaller than n) against K @ S."""
    from pnsolve.gp.cagp import products
    from pnsolve.gp.cagp.actions import BlockActions, random_blocks
    from pnsolve.gp.cagp.products import block_kernel_product

    monkeypatch.setattr(products, "_tile", lambda n, itemsize, device: (64, 50))

    X, _ = data(230)
    pattern = BlockActions(random_blocks(230, 11, gen(2), X.device), 11)
    values = pattern.initial_values(F64, gen(3))
    W = torch.randn(230, 11, generator=gen(4), dtype=F64)
    results = []
    nu = getattr(make(), "nu", None)
    assert products._analytic(make()) == (nu != 0.5)  # closed-form tile gradients, or autograd
    for fused in (True, False):
        k = make()
        v = values.clone().requires_grad_(True)
        if fused:
            KS = block_kernel_product(k, X, v, pattern.block_of, 11)
        else:
            KS = k(X) @ pattern.dense(v)
        grads = torch.autograd.grad((KS * W).sum(), [v, *k.parameters()])
        results.append((KS.detach(), *grads))
    tol = exact_tol(F64, 230)
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol * float(b.abs().max()))
