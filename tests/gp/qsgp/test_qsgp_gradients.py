"""QSGP's stochastic gradients: unbiased for the exact ELBO's gradient (statistical).

The value tests (test_qsgp_statistics.py) cannot see a wrong factor that only enters the
gradient (appendix F.1's rescaled sparse gradient of the control variate contributes
nothing to the value), so here the mean of the per-draw gradients in ``μ``, the dense
columns of ``C`` and ``log c_rr`` is compared with autograd through the exact ELBO:
a two-sided z-test per coordinate, Bonferroni over the coordinates, family-wise false
alarm 1e-4, fixed seeds.
"""

from __future__ import annotations

import math

import pytest
import torch

from pnsolve.gp.qsgp.estimator import estimate
from pnsolve.gp.qsgp.exact import exact_elbo
from pnsolve.gp.qsgp.sampling import draw_indices
from pnsolve.testing import exact_tol, statistical_threshold

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.statistical]

FALSE_ALARM = 1e-4
DRAWS = 3000
F64 = torch.float64


def _exact_gradient(q, X, y) -> torch.Tensor:
    mu = q.mean_weights.detach().clone().requires_grad_(True)
    log_diag = q.cov.log_diag.detach().clone().requires_grad_(True)
    lower = q.cov.lower.detach().clone().requires_grad_(True)
    saved = q.cov.log_diag, q.cov.lower
    q.cov.log_diag, q.cov.lower = log_diag, lower
    try:
        value = exact_elbo(q.features, q.cov, mu, torch.exp(q.log_noise), q.likelihood, X, y,
                           q.quadrature(X))  # fmt: skip
        grads = torch.autograd.grad(value, [mu, log_diag, lower])
    finally:
        q.cov.log_diag, q.cov.lower = saved
    return torch.cat([g.reshape(-1) for g in grads])


def _estimated_gradient(q, X, y, cv, generator) -> torch.Tensor:
    draw = draw_indices(X.shape[0], q.m, q.cov.R, q.batch_size, q.feature_batch_size, generator,
                        device=X.device)  # fmt: skip
    est = estimate(q.features, q.cov, q.mean_weights, torch.exp(q.log_noise), q.likelihood, X,
                   y, draw, cv, q.quadrature(X))  # fmt: skip
    est.elbo.backward()
    L, R = est.leaves, q.cov.R
    mu = torch.zeros(q.m, dtype=F64)
    mu[draw.u] = L.mu.grad
    log_diag = torch.zeros(q.m, dtype=F64)
    lower = torch.zeros_like(q.cov.lower)
    if R:
        log_diag[:R] = L.log_diag_dense.grad
        lower[draw.u] = L.lower.grad
    if draw.diag.numel():
        log_diag[draw.diag] = L.log_diag_diag.grad
    return torch.cat([mu, log_diag, lower.reshape(-1)])


@pytest.mark.parametrize(
    ("likelihood", "covariance", "nbar", "linear"),
    [
        ("gaussian", "chevron", 25, True),
        ("gaussian", "chevron", 0, False),
        ("gaussian", "diagonal", 25, False),
        ("bernoulli", "chevron", 0, False),
    ],
)
def test_the_gradient_estimate_is_unbiased(likelihood, covariance, nbar, linear, problem, model):
    """E[∇ estimate] = ∇ ELBO (Gaussian) in every parameter the step updates; for
    Bernoulli, with every basis function in each draw (m̃ ≥ m) Theorem 3's bound is the
    ELBO itself, so data subsampling alone must leave its gradient unbiased."""
    X, y = problem(likelihood)
    mt = 8 if likelihood == "gaussian" else 30
    q = model(likelihood, covariance=covariance, X=X, batch_size=15, feature_batch_size=mt,
              control_variate_rank=nbar, linear_control_variate=linear)  # fmt: skip
    exact = _exact_gradient(q, X, y)
    cv = q.control_variates_for(X, y)
    g = torch.Generator().manual_seed(7)
    G = torch.stack([_estimated_gradient(q, X, y, cv, g) for _ in range(DRAWS)])
    mean, se = G.mean(0), G.std(0) / math.sqrt(DRAWS)
    random = se > exact_tol(F64, X.shape[0]) * (1 + exact.abs())
    assert int(random.sum()) > q.m  # the test sees the sampled coordinates
    z = (mean[random] - exact[random]) / se[random]
    assert float(z.abs().max()) <= statistical_threshold(FALSE_ALARM / int(random.sum()))
    # coordinates without sampling noise (e.g. entries of C never read) match exactly
    scale = exact_tol(F64, X.shape[0]) * (1 + exact[~random].abs())
    assert bool(((mean[~random] - exact[~random]).abs() <= 10 * scale).all())
