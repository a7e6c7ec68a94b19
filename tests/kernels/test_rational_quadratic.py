"""The rational quadratic kernel: formula, backends, gradients to α, spectral draws.

The KeOps test compiles one product and its gradient reductions (float64, ARD, α as a
pykeops parameter): about 25 s on a cold cache.
"""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels import RandomFourierFeatures
from pnsolve.kernels.rational_quadratic import gamma_draws
from pnsolve.testing.device import suite_device
from pnsolve.testing.tolerances import exact_tol, statistical_threshold

F64 = torch.float64


def _randn(*shape, seed=0, dtype=F64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _kernel(alpha=1.7):
    return pn.kernels.RationalQuadratic(
        lengthscale=torch.tensor([0.6, 1.1, 1.5], dtype=F64),
        alpha=alpha,
        outputscale=torch.tensor(1.3, dtype=F64),
    )


def _assert_close(a, b, n):
    tol = exact_tol(a.dtype, n) * max(1.0, float(b.detach().abs().max()))
    assert float((a - b).detach().abs().max()) <= tol


def test_matches_the_formula_and_scikit_learn():
    k = _kernel()
    X1, X2 = _randn(9, 3), _randn(6, 3, seed=1)
    diff = (X1[:, None, :] - X2[None, :, :]) / torch.tensor([0.6, 1.1, 1.5], dtype=F64)
    r2 = diff.pow(2).sum(-1)
    with torch.no_grad():
        _assert_close(k(X1, X2), 1.3 * (1 + r2 / (2 * 1.7)) ** -1.7, 3)
        K = k(X1)
        assert torch.equal(K, K.mT)
        _assert_close(k.diag(X1), torch.diagonal(K), 1)
    sk = pytest.importorskip("sklearn.gaussian_process.kernels")
    iso = pn.kernels.RationalQuadratic(lengthscale=0.7, alpha=0.4, outputscale=2.0)
    ref = 2.0 * sk.RationalQuadratic(length_scale=0.7, alpha=0.4)(X1.numpy(), X2.numpy())
    with torch.no_grad():
        _assert_close(iso(X1, X2).cpu(), torch.from_numpy(ref), 3)


def test_large_alpha_tends_to_the_rbf():
    # |(1 + t/α)^(−α) − e^(−t)| ≤ t² e^(−t) / α for t = r²/2 ≥ 0 (first-order term), so
    # at α = 1e6 the two agree to about 1e-6 on these inputs (t ≤ 20)
    X = _randn(20, 3)
    rq = pn.kernels.RationalQuadratic(lengthscale=0.9, alpha=1e6)
    rbf = pn.kernels.RBF(lengthscale=0.9)
    with torch.no_grad():
        assert float((rq(X) - rbf(X)).abs().max()) <= 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_psd_and_dtype_following(dtype):
    k = pn.kernels.RationalQuadratic(lengthscale=0.5, alpha=0.3)
    X = _randn(60, 2, seed=3, dtype=dtype)
    with torch.no_grad():
        K = k(X)
    assert K.dtype == dtype
    lam = torch.linalg.eigvalsh(K.double())
    assert float(lam.min()) >= -60 * exact_tol(dtype, 60) * float(lam.max())


def test_bad_alpha_is_refused_by_name():
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="alpha"):
            pn.kernels.RationalQuadratic(alpha=bad)
    with pytest.raises(ValueError, match="alpha must be a scalar"):
        pn.kernels.RationalQuadratic(alpha=torch.ones(2))
    k = pn.kernels.RationalQuadratic()
    with pytest.raises(ValueError, match="alpha"):
        k.alpha = -2.0
    k.alpha = 3.0
    assert float(k.alpha.detach()) == pytest.approx(3.0, rel=exact_tol(F64, 4))


@pytest.mark.parametrize("backend", ["dense", "chunked"])
def test_products_and_gradients_to_every_parameter(backend):
    X, V = _randn(37, 3), _randn(37, 2, seed=5)
    opts = {"tile": (8, 16)} if backend == "chunked" else {}
    grads = {}
    for how in ("reference", backend):
        k = _kernel()
        if how == "reference":
            out = k(X) @ V
        else:
            out = k.linop(X, backend=backend, **opts) @ V
        (out * torch.cos(out)).sum().backward()
        grads[how] = (out.detach(), [p.grad for p in k.parameters()])
    _assert_close(grads[backend][0], grads["reference"][0], 37)
    names = [name for name, _ in _kernel().named_parameters()]
    assert names == ["raw_lengthscale", "raw_outputscale", "raw_alpha"]
    for got, want in zip(grads[backend][1], grads["reference"][1], strict=True):
        _assert_close(got, want, 37 * 37)


def test_chunked_gradcheck_in_alpha_and_inputs():
    k = pn.kernels.RationalQuadratic(lengthscale=0.8, alpha=0.9)
    X = _randn(7, 2).requires_grad_(True)
    V = _randn(7, 2, seed=1)

    def f(x, raw_alpha):
        with torch.no_grad():
            k.raw_alpha.copy_(raw_alpha)
        return k.linop(x, backend="chunked", tile=(3, 4)) @ V

    assert torch.autograd.gradcheck(lambda x: f(x, k.raw_alpha.detach().clone()), (X,))
    k.zero_grad()
    (k.linop(X.detach(), backend="chunked", tile=(3, 4)) @ V).sum().backward()
    analytic = float(k.raw_alpha.grad)
    h = 1e-6
    base = k.raw_alpha.detach().clone()
    vals = []
    for s in (1, -1):
        with torch.no_grad():
            k.raw_alpha.copy_(base + s * h)
            vals.append(float((k(X.detach()) @ V).sum()))
    with torch.no_grad():
        k.raw_alpha.copy_(base)
    assert analytic == pytest.approx((vals[0] - vals[1]) / (2 * h), rel=1e-6)


@pytest.mark.keops
def test_keops_matches_chunked_values_and_gradients():
    pytest.importorskip("pykeops.torch")
    X, V = _randn(40, 3), _randn(40, 2, seed=2)
    results = {}
    for backend in ("chunked", "keops"):
        k = _kernel(alpha=0.8)
        out = k.linop(X, backend=backend) @ V
        out.square().sum().backward()
        results[backend] = (out.detach(), [p.grad for p in k.parameters()])
        k.alpha = 2.5  # a new α value: the same compiled formula (a parameter)
        out2 = k.linop(X, backend=backend) @ V
        results[backend + "2"] = (out2.detach(), [])
    _assert_close(results["keops"][0], results["chunked"][0], 40)
    _assert_close(results["keops2"][0], results["chunked2"][0], 40)
    for got, want in zip(results["keops"][1], results["chunked"][1], strict=True):
        _assert_close(got, want, 40 * 40)


@pytest.mark.parametrize("shape", [0.3, 1.0, 4.5])
def test_gamma_draws_have_mean_one_and_variance_one_over_alpha(shape):
    # Gamma(a, rate a): mean 1, variance 1/a, fourth central moment (3a + 6)/a³. With
    # N = 40 000 draws the sample mean and variance are within statistical_threshold(1e-3)
    # standard errors of their targets (false alarm 1e-3 each, fixed seed).
    N = 40_000
    d = gamma_draws(shape, N, generator=torch.Generator().manual_seed(11), dtype=F64)
    assert d.shape == (N,) and bool((d > 0).all())
    z = statistical_threshold(1e-3)
    var = 1.0 / shape
    assert abs(float(d.mean()) - 1.0) <= z * math.sqrt(var / N)
    mu4 = (3 * shape + 6) / shape**3
    assert abs(float(d.var()) - var) <= z * math.sqrt((mu4 - var**2) / N)


def test_random_features_are_unbiased_for_the_kernel():
    # E[φ(x)ᵀφ(x')] = k(x, x') when ω follows the spectral density. Each feature gives an
    # independent term 2σ² cos(ωᵀx + b) cos(ωᵀx' + b), so every entry of φφᵀ is a mean of
    # m = 20 000 i.i.d. bounded terms: |error| ≤ z · sd / √m per entry (CLT), z for false
    # alarm 1e-3 over the 64 entries (Bonferroni); a wrong spectral density (e.g. the
    # RBF's, λ = 1) biases the entries by far more than that.
    k = pn.kernels.RationalQuadratic(lengthscale=0.8, alpha=0.6, outputscale=1.5)
    X = _randn(8, 2, seed=4)
    m = 20_000
    f = RandomFourierFeatures(
        k, m, 2, generator=torch.Generator().manual_seed(3), dtype=F64, device=suite_device()
    )
    X = X.to(suite_device())
    with torch.no_grad():
        Phi = f(X)
        terms = m * Phi[:, None, :] * Phi[None, :, :]  # (8, 8, m): the i.i.d. terms
        est, sd = terms.mean(-1), terms.std(-1)
        K = k(X)
    z = statistical_threshold(1e-3 / 64)
    assert bool(((est - K).abs() <= z * sd / math.sqrt(m)).all())


def test_random_features_refuse_after_alpha_changed():
    k = pn.kernels.RationalQuadratic(lengthscale=0.8, alpha=0.6)
    f = RandomFourierFeatures(k, 16, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    X = _randn(4, 2)
    f(X)
    k.lengthscale = 0.5  # the lengthscale scales the frozen draws: still valid
    f(X)
    k.alpha = 2.0
    with pytest.raises(ValueError, match="RationalQuadratic kernel's spectral parameters"):
        f(X)
    k.alpha = 0.6
    f(X)


def _regression(n=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64) * 3
    return X, torch.sin(2 * X).sum(1) + 0.1 * torch.randn(n, generator=g, dtype=F64)


def test_itergp_with_n_cg_steps_has_the_exact_mean_and_no_smaller_variance():
    X, y = _regression()
    k = pn.kernels.RationalQuadratic(lengthscale=torch.tensor([0.7, 1.2], dtype=F64), alpha=0.8)
    Xs = _randn(10, 2, seed=9)
    exact = pn.gp.ExactGP(k, 0.5).fit(X, y).posterior(Xs)  # well conditioned: CG is exact
    it = pn.gp.IterGP(k, 0.5, pn.policies.CG(), pn.stopping.MaxIterations(120)).fit(X, y)
    post = it.posterior(Xs)
    with torch.no_grad():
        assert float((post.mean - exact.mean).abs().max()) <= 1e-6
        # CG stops once its residual is rounding (before n steps): the directions it
        # never explored keep computational variance, never less than the exact GP's
        assert float((post.var - exact.var).min()) >= -1e-10


def test_cagp_learns_alpha_through_its_block_product():
    X, y = _regression()
    k = pn.kernels.RationalQuadratic(lengthscale=torch.ones(2, dtype=F64), alpha=1.0)
    m = pn.gp.CaGP(k, 0.1, 16).fit(X, y, steps=25, generator=torch.Generator().manual_seed(0))
    history = [h["elbo"] for h in m.training.history]
    assert float(k.alpha.detach()) != pytest.approx(1.0, rel=1e-3)
    assert m.elbo(X, y) > history[0]


def test_pathwise_draws_and_qsgp_feature_blocks_refuse_after_alpha_changed():
    from pnsolve.gp.pathwise import PathwiseDraws
    from pnsolve.gp.qsgp.features import FeatureBlocks

    k = pn.kernels.RationalQuadratic(lengthscale=0.8, alpha=0.6)
    X = _randn(12, 2)
    draws = PathwiseDraws.draw(k, 32, 3, X, torch.Generator().manual_seed(0))
    blocks = FeatureBlocks(
        RandomFourierFeatures(k, 32, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    )
    with torch.no_grad():
        draws.prior(k, X), blocks.block(X)
        k.lengthscale = 0.4  # followed through ε / ℓ
        draws.prior(k, X), blocks.block(X)
        k.alpha = 1.5
        for call in (lambda: draws.prior(k, X), lambda: blocks.block(X)):
            with pytest.raises(ValueError, match="spectral parameters changed"):
                call()


def test_the_pathwise_estimators_state_keeps_the_spectral_state():
    k = pn.kernels.RationalQuadratic(lengthscale=0.8, alpha=0.6)
    X = _randn(12, 2)
    est = pn.gp.PathwiseEstimator(4, 16, generator=torch.Generator().manual_seed(0))
    est._draws = est._draw(k, X)  # what its first targets() call does
    restored = pn.gp.PathwiseEstimator(4, 16, generator=torch.Generator().manual_seed(5))
    restored.load_state_dict(est.state_dict())
    assert restored._draws.spectral_state.tolist() == [pytest.approx(0.6, rel=1e-12)]
    k.alpha = 0.9
    with pytest.raises(ValueError, match="spectral parameters changed"):
        restored.features(k, X)


def test_log_hyperparameters_cover_alpha():
    params = pn.gp.bayes.LogHyperparameters(pn.kernels.RationalQuadratic(0.5, 2.0), 0.1)
    assert params.names == ("log_lengthscale", "log_outputscale", "log_alpha", "log_noise")
    theta = params.initial()
    assert theta[2] == pytest.approx(math.log(2.0), rel=1e-12)
    assert float(params.kernel_at(theta + 0.5).alpha) == pytest.approx(2.0 * math.exp(0.5))


def test_alpha_joins_the_other_hyperparameters_device_or_is_refused():
    from pnsolve.testing.device import lazy_device

    lazy = lazy_device()
    alone = pn.kernels.RationalQuadratic(alpha=torch.tensor(2.0, dtype=F64).to(lazy))
    assert {p.device for p in alone.parameters()} == {torch.ones(1).to(lazy).device}
    number = pn.kernels.RationalQuadratic(lengthscale=torch.tensor(1.0).to(lazy), alpha=2.0)
    assert {p.device for p in number.parameters()} == {torch.ones(1).to(lazy).device}
    with pytest.raises(ValueError, match=r"lengthscale is on device .* but alpha on cpu"):
        pn.kernels.RationalQuadratic(
            lengthscale=torch.tensor(1.0).to(lazy), alpha=torch.tensor(2.0)
        )
