"""IterNCGP with recycling keeps a valid belief: latent variance ≥ the exact Laplace variance.

Each Newton step's belief is ``C_t ⪯ A_t⁻¹`` (``A_t = K + W_t⁻¹``), so the combined
latent variance ``k − k C_t k`` can never fall below the Laplace variance
``k − k A_t⁻¹ k`` of the same system. A replayed Krylov buffer once broke this (rank
above ``N``; sklearn's GPC toy data gave 0.758 against 0.880, and breast-cancer data
raised "negative latent variance"). The reference here is dense: ``A_t`` is formed and
solved directly.
"""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import conjugacy_tol

F64 = torch.float64

sklearn_datasets = pytest.importorskip("sklearn.datasets")


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _laplace_variance(m: pn.gp.IterNCGP, X: torch.Tensor, Xs: torch.Tensor) -> torch.Tensor:
    """``k(x, x) − k(x, X) P A_t⁻¹ P k(X, x)`` for the model's last Newton system, dense."""
    C = m.likelihood.num_latent
    A = m.A.to_dense()
    cross = torch.kron(torch.eye(C, dtype=F64), m.kernel(X, Xs))  # (C n, C t)
    P = m.likelihood.latent_projector(X.shape[0], F64, X.device)
    if P is not None:
        cross = P @ cross
    L = torch.linalg.cholesky(A)
    half = torch.linalg.solve_triangular(L, cross, upper=False)
    var = m.kernel.diag(Xs).repeat(C) - half.square().sum(0)
    return var if C == 1 else var.reshape(C, -1).mT


def _cond(m: pn.gp.IterNCGP) -> float:
    lam = torch.linalg.eigvalsh(m.A.to_dense())
    return float(lam[-1] / lam[0])


def _check(m: pn.gp.IterNCGP, X: torch.Tensor, Xs: torch.Tensor) -> None:
    post = m.posterior(Xs)
    exact = _laplace_variance(m, X, Xs)
    scale = float(m.kernel.diag(Xs[:1])[0])
    tol = conjugacy_tol(F64, _cond(m), m.A.shape[0]) * scale
    gap = float((post.var - exact).min())
    assert gap >= -tol, (
        f"combined variance below the Laplace variance by {-gap:.3e} (tol {tol:.1e})"
    )
    assert m.belief.rank <= m.A.shape[0]
    p = m.predict_proba(Xs)
    assert bool(torch.isfinite(p).all())


def _fit(kernel, lik, X, y, iters, **kw):
    return pn.gp.IterNCGP(
        kernel, lik, pn.policies.CG(), pn.stopping.MaxIterations(iters), **kw
    ).fit(X, y)


@pytest.mark.parametrize("iters", [5, 30])
def test_sklearn_gpc_toy_data(iters):
    # scikit-learn's GPC test data: x in [0, 10], y = [x sin x > 0], RBF(0.1); 30
    # iterations run CG past convergence on N = 30, the regime of the reported bug.
    X = torch.linspace(0, 10, 30, dtype=F64).unsqueeze(-1)
    y = (X[:, 0] * torch.sin(X[:, 0]) > 0).to(F64)
    m = _fit(pn.kernels.RBF(lengthscale=0.1), pn.likelihoods.Bernoulli(), X, y, iters)
    _check(m, X, X)


@pytest.mark.parametrize("lengthscale", [1.0, 3.0])
def test_breast_cancer_all_points(lengthscale):
    data = sklearn_datasets.load_breast_cancer()
    X = torch.as_tensor(data.data, dtype=F64)
    X = (X - X.mean(0)) / X.std(0)
    y = torch.as_tensor(data.target, dtype=F64)
    n = X.shape[0]
    m = _fit(pn.kernels.RBF(lengthscale=lengthscale), pn.likelihoods.Bernoulli(), X, y, n)
    _check(m, X, X)
    # the buffer keeps informative actions only: it cannot outgrow N by more than the
    # steps that ended in a breakdown (the superlinear replay cost came from its growth)
    assert m.buffer.size <= n + len(m.steps)


@pytest.mark.slow
def test_digits_softmax():
    data = pn.datasets.load_digits(generator=torch.Generator().manual_seed(0))
    X, y = data.X_train[:150], data.y_train[:150]
    m = _fit(
        pn.kernels.RBF(lengthscale=math.sqrt(X.shape[1]) / 2),
        pn.likelihoods.Softmax(10),
        X,
        y,
        200,
        max_newton_steps=8,
    )
    _check(m, X, data.X_test[:40])


def test_newton_loop_that_never_converges_keeps_the_buffer_bounded():
    # newton_tol = 0: every step replays the buffer and adds CG's budget; the buffer
    # grew to 3946 columns for N = 300 (72 s) before the fix, now N plus one per step.
    data = sklearn_datasets.load_breast_cancer()
    X = torch.as_tensor(data.data[:200], dtype=F64)
    X = (X - X.mean(0)) / X.std(0)
    y = torch.as_tensor(data.target[:200], dtype=F64)
    m = _fit(
        pn.kernels.RBF(lengthscale=3.0),
        pn.likelihoods.Bernoulli(),
        X,
        y,
        200,
        max_newton_steps=20,
        newton_tol=0.0,
    )
    assert len(m.steps) == 20
    assert m.buffer.size <= 200 + 20
    _check(m, X, X[:50])
