"""IterNCGP: Laplace mode vs a dense Newton reference, recycling, compression, Gaussian = IterGP."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import CountingOperator, exact_tol, iterative_tol

F64 = torch.float64


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _kernel():
    return pn.kernels.RBF(lengthscale=0.3, outputscale=2.0)


def _data(kind, n=80, seed=0):
    g = _gen(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64)
    f = torch.sin(6 * X[:, 0]) + torch.cos(4 * X[:, 1])
    if kind == "bernoulli":
        y = (torch.rand(n, generator=g, dtype=F64) < torch.sigmoid(2 * f)).to(F64)
        return X, y, pn.likelihoods.Bernoulli()
    if kind == "poisson":
        return X, torch.poisson(torch.exp(f), generator=g), pn.likelihoods.Poisson()
    logits = torch.stack([f, -f, 0.5 * f.square()], dim=1)
    y = torch.multinomial(torch.softmax(2 * logits, dim=1), 1, generator=g).squeeze(1)
    return X, y, pn.likelihoods.Softmax(3)


def _dense_mode(kernel, X, y, lik, steps=60):
    """Newton on Ψ(f) = log p(y|f) − ½ fᵀK⁻¹f: f ← K (I + W K)⁻¹ (W f + g), dense."""
    C = lik.num_latent
    K = torch.block_diag(*([kernel(X)] * C))
    f = torch.zeros(C * X.shape[0], dtype=F64)
    for _ in range(steps):
        F = lik.unflatten(f)
        W = lik.hessian(F, y).to_dense()
        g = lik.flatten(lik.gradient(F, y))
        a = torch.linalg.solve(torch.eye(K.shape[0], dtype=F64) + W @ K, W @ f + g)
        f = K @ a
    return f


def _model(lik, iters=400, **kw):
    stop = pn.stopping.MaxIterations(iters) | pn.stopping.ResidualNorm(rtol=1e-11)
    return pn.gp.IterNCGP(
        _kernel(), lik, pn.policies.CG(), stop, max_newton_steps=40, newton_tol=1e-10, **kw
    )


@pytest.mark.parametrize("kind", ["bernoulli", "poisson", "softmax"])
@pytest.mark.parametrize("recycle", [False, True])
def test_newton_reaches_the_dense_laplace_mode(kind, recycle):
    X, y, lik = _data(kind)
    m = _model(lik, recycle=recycle).fit(X, y)
    ref = _dense_mode(_kernel(), X, y, lik)
    f = lik.flatten(m.f)
    tol = iterative_tol(F64) * 1e3 * max(1.0, float(ref.abs().max()))  # Newton on inexact solves
    torch.testing.assert_close(f, ref, rtol=0, atol=tol)
    assert m.steps[-1].change <= 1e-10
    if kind == "softmax":
        post = m.posterior(X[:7])
        assert post.mean.shape == (7, 3) and post.var.shape == (7, 3)
        p = m.predict_proba(X[:7])
        torch.testing.assert_close(p.sum(1), torch.ones(7, dtype=F64))


def test_recycling_needs_fewer_kernel_products():
    X, y, lik = _data("bernoulli", n=150, seed=1)
    counts = {}
    for recycle in (False, True):
        K = CountingOperator(pn.linops.KernelMatrix(_kernel(), X, backend="dense"))
        m = _model(lik, recycle=recycle).fit(X, y, K=K)
        counts[recycle] = K.products
        assert m.steps[-1].change <= 1e-10
    assert counts[True] < 0.6 * counts[False], counts


def test_compression_bounds_the_buffer():
    X, y, lik = _data("poisson", n=100, seed=2)
    rank = 8
    m = _model(lik, iters=5, recycle=True, max_rank=rank)
    m.max_newton_steps = 6
    for _, state, _ in m.iterate(X, y):
        assert m.buffer.size <= rank + state.iteration
    assert all(s.buffer_size <= rank for s in m.steps)
    assert m.buffer.nbytes <= 2 * rank * 100 * 8


def test_gaussian_likelihood_equals_itergp():
    X, y, _ = _data("bernoulli", n=60, seed=3)
    y = torch.sin(5 * X[:, 0])
    Xs = torch.rand(9, 2, generator=_gen(4), dtype=F64)
    stop = pn.stopping.MaxIterations(7)
    a = pn.gp.IterNCGP(
        _kernel(), pn.likelihoods.Gaussian(0.1), pn.policies.CG(), stop, mean=0.2
    ).fit(X, y)
    b = pn.gp.IterGP(_kernel(), 0.1, pn.policies.CG(), stop, mean=0.2).fit(X, y)
    assert len(a.steps) == 1
    pa, pb = a.posterior(Xs), b.posterior(Xs)
    tol = exact_tol(F64, 60) * 1e3
    torch.testing.assert_close(pa.mean, pb.mean, rtol=0, atol=tol)
    torch.testing.assert_close(pa.var, pb.var, rtol=0, atol=tol)


def test_marginal_variance_non_increasing_in_the_inner_loop_and_above_laplace():
    X, y, lik = _data("bernoulli", n=70, seed=5)
    Xs = torch.rand(12, 2, generator=_gen(6), dtype=F64)
    m = _model(lik, iters=6, recycle=False)
    m.max_newton_steps = 3
    tol = exact_tol(F64, 70) * 10
    prev = None
    for step, _, post in m.iterate(X, y, Xs=Xs):
        if prev is not None and prev[0] == step:
            assert torch.all(post.var <= prev[1] + tol)
        prev = (step, post.var)
    post = m.posterior(Xs)
    assert torch.all(post.comp_var >= -tol)  # combined ≥ exact Laplace variance at the mode


@pytest.mark.parametrize(
    "kind,y,match",
    [
        ("bernoulli", lambda n: torch.full((n,), 2.0, dtype=F64), "y"),
        ("poisson", lambda n: torch.full((n,), -1.0, dtype=F64), "y"),
        ("poisson", lambda n: torch.full((n,), 0.5, dtype=F64), "y"),
        ("softmax", lambda n: torch.full((n,), 3, dtype=torch.int64), "y"),
        ("bernoulli", lambda n: torch.zeros(n + 1, dtype=F64), "targets"),
    ],
)
def test_bad_targets(kind, y, match):
    X, _, lik = _data(kind, n=20)
    with pytest.raises(ValueError, match=match):
        _model(lik).fit(X, y(20))


def test_bad_configuration():
    lik = pn.likelihoods.Bernoulli()
    with pytest.raises(ValueError, match="max_newton_steps"):
        pn.gp.IterNCGP(_kernel(), lik, pn.policies.CG(), pn.stopping.MaxIterations(2), 0)
    with pytest.raises(ValueError, match="max_rank"):
        pn.gp.IterNCGP(_kernel(), lik, pn.policies.CG(), pn.stopping.MaxIterations(2), max_rank=0)
    with pytest.raises(TypeError, match="likelihood"):
        pn.gp.IterNCGP(_kernel(), "bernoulli", pn.policies.CG(), pn.stopping.MaxIterations(2))
    with pytest.raises(RuntimeError, match="fit"):
        _model(lik).posterior(torch.zeros(2, 2, dtype=F64))
    X, y, _ = _data("bernoulli", n=20)
    with pytest.raises(ValueError, match="K must have shape"):
        _model(lik).fit(X, y, K=pn.linops.as_linop(torch.eye(19, dtype=F64)))
