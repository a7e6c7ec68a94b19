"""Numerical sanity of the GP models on data nobody tuned for.

* A query never returns a negative variance: ``k(x, x) − kᵀ C k`` cancels where the
  posterior is sure (duplicated inputs, tiny noise) and rounding left it below zero
  (before: ExactGP −1.2e-7 and IterGP −2.4e-7 in float32, IterGP with unit-vector
  actions −2.1e-13 in float64, AffineGP −2.4e-7 in float32, LOVE raising ``ValueError``
  on −1.2e-7). Values clearly below zero still raise.
* Rounding-level curvature in a recycled IterNCGP solve is a breakdown, not
  ``NotPositiveDefiniteError`` (before: −4.4e-28 on two noisy circles, ``CG``,
  ``MaxIterations(10)``, ``recycle=True``, ``max_rank=10``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.belief_posterior import belief_posterior
from pnsolve.gp.posterior import NegativeVarianceError
from pnsolve.testing import eps

F32, F64 = torch.float32, torch.float64
LENGTHSCALE = 0.3


def _duplicated(n: int, copies: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, 1, generator=g, dtype=dtype).repeat(copies, 1)
    return X, torch.sin(6 * X[:, 0])


def _kernel() -> pn.kernels.RBF:
    return pn.kernels.RBF(lengthscale=LENGTHSCALE)


Query = Callable[[torch.Tensor, torch.Tensor, float], pn.gp.GaussianPosterior]

QUERIES: dict[str, tuple[Query, torch.dtype, float, int]] = {
    # name: (posterior at the training inputs, dtype, noise, copies of 20 or 50 inputs)
    "exact-f32": (lambda X, y, s: pn.gp.ExactGP(_kernel(), s).fit(X, y).posterior(X), F32,
                  1e-6, 2),
    "itergp-cg-f32": (lambda X, y, s: pn.gp.IterGP(
        _kernel(), s, pn.policies.CG(), pn.stopping.MaxIterations(X.shape[0])
    ).fit(X, y).posterior(X), F32, 1e-6, 2),
    "itergp-unit-f64": (lambda X, y, s: pn.gp.IterGP(
        _kernel(), s, pn.policies.UnitVector(), pn.stopping.MaxIterations(X.shape[0])
    ).fit(X, y).posterior(X), F64, 1e-12, 2),
    "affine-f32": (lambda X, y, s: pn.gp.AffineGP(
        _kernel(), s, pn.iterative.CyclicProjections(sweeps=3, block_size=X.shape[0])
    ).fit(X, y).posterior(X), F32, 1e-6, 2),
    "love-f32": (lambda X, y, s: pn.gp.ExactGP(_kernel(), s).fit(X, y).posterior(
        X, method="love", rank=X.shape[0]), F32, 1e-6, 2),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_a_query_never_returns_a_negative_variance(name):
    query, dtype, noise, copies = QUERIES[name]
    X, y = _duplicated(20 if dtype == F32 else 50, copies, dtype)
    post = query(X, y, noise)
    assert bool(torch.isfinite(post.var).all())
    assert float(post.var.min()) >= 0.0
    prior = float(_kernel().diag(X[:1]).detach().max())
    assert float(post.var.max()) <= prior * (1 + math.sqrt(eps(dtype)))


def test_a_clearly_negative_variance_is_reported_not_hidden():
    X, _ = _duplicated(20, 1, F64)
    k = _kernel()
    A = pn.linops.as_linop((k(X, X) + 0.1 * torch.eye(X.shape[0], dtype=F64)).detach())
    L = torch.linalg.cholesky(A.to_dense())
    V = 2.0 * torch.linalg.solve_triangular(L, torch.eye(X.shape[0], dtype=F64), upper=False).mT
    with pytest.raises(NegativeVarianceError, match="negative variance"):
        belief_posterior(
            cross=k.linop(X, X), prior_var=k.diag(X), prior_cov=lambda: k(X, X),
            weights=torch.zeros(X.shape[0], dtype=F64), offset=0.0, A=A, V=V,
        )  # fmt: skip
    assert issubclass(NegativeVarianceError, ValueError)
    assert issubclass(NegativeVarianceError, ArithmeticError)


def _circles(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two noisy concentric circles (radii 1 and 0.5), labels alternating."""
    g = torch.Generator().manual_seed(seed)
    t = 2 * math.pi * torch.rand(n, generator=g, dtype=F64)
    y = (torch.arange(n) % 2).to(F64)
    r = torch.where(y > 0, 0.5, 1.0)
    X = torch.stack([r * torch.cos(t), r * torch.sin(t)], 1)
    return X + 0.1 * torch.randn(n, 2, generator=g, dtype=F64), y


def test_rounding_level_curvature_in_a_recycled_iterncgp_solve_is_a_breakdown():
    X, y = _circles(100, seed=7)
    m = pn.gp.IterNCGP(
        pn.kernels.RBF(lengthscale=3.0), pn.likelihoods.Bernoulli(), pn.policies.CG(),
        pn.stopping.MaxIterations(10), recycle=True, max_rank=10,
    )  # fmt: skip
    m.fit(X, y)
    post = m.posterior(X)
    assert bool(torch.isfinite(post.mean).all())
    assert float(post.var.min()) >= 0.0
    p = m.predict_proba(X)
    assert bool(((p >= 0) & (p <= 1)).all())
