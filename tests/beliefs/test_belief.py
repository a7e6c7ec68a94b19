"""``GaussianSolutionBelief``: moments, cheap queries and samples under both priors."""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.beliefs import GaussianPrior, InversePrior
from pnsolve.linops import Dense
from pnsolve.problems import make_problem
from pnsolve.stopping import MaxIterations
from pnsolve.testing import exact_tol, krylov_tol, statistical_threshold

F64 = torch.float64
COND = 1e2
#: False-alarm probability of each statistical test in this module.
FALSE_ALARM = 1e-3


def _problem(n=12, seed=0):
    return make_problem("exponential", n, generator=torch.Generator().manual_seed(seed), cond=COND)


def _belief(p, k, prior="inverse", x0=None):
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(k), prior=prior)
    return solver.solve(p.A, p.b, x0=x0)[0]


def _dense_prior(p, prior):
    if prior == "inverse":
        return torch.linalg.inv(p.A.to_dense())
    return prior * torch.eye(p.n, dtype=F64)


def _rel(a, b):
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


PRIORS = ["inverse", 2.0]


@pytest.mark.parametrize("prior", PRIORS)
def test_covariance_is_the_gaussian_posterior(prior):
    """Σ_i = Σ₀ − Σ₀AS(SᵀAΣ₀AS)⁻¹SᵀAΣ₀ and x_i = x₀ + Σ₀AS(SᵀAΣ₀AS)⁻¹Sᵀr₀, densely."""
    p, k = _problem(), 4
    x0 = torch.linspace(-1, 1, p.n, dtype=F64)
    states = list(
        pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(k), prior=prior).iterate(
            p.A, p.b, x0=x0
        )
    )
    belief = states[-1].belief
    S = torch.cat([s.action for s in states[1:]], dim=1)
    A, S0 = p.A.to_dense(), _dense_prior(p, prior)
    K = S0 @ A @ S
    gram = S.mT @ A @ K
    cov = S0 - K @ torch.linalg.solve(gram, K.mT)
    mean = x0 + K @ torch.linalg.solve(gram, S.mT @ (p.b - A @ x0))
    tol = krylov_tol(F64, COND)
    assert _rel(belief.mean, mean) <= tol
    assert _rel(belief.cov.to_dense(), cov) <= tol
    # C_i: x_i = x₀ + C_i r₀
    r0 = p.b - A @ x0
    assert _rel(x0 + belief.inverse_approx @ r0, belief.mean) <= tol
    if prior == "inverse":
        C = S @ torch.linalg.solve(S.mT @ A @ S, S.mT)
        assert _rel(belief.inverse_approx.to_dense(), C) <= tol


@pytest.mark.parametrize("prior", PRIORS)
def test_var_and_downdate_variance(prior):
    p = _problem()
    belief = _belief(p, 5, prior)
    U = torch.randn(p.n, 3, generator=torch.Generator().manual_seed(1), dtype=F64)
    cov = belief.cov.to_dense()
    S0 = _dense_prior(p, prior)
    expected = torch.einsum("im,ij,jm->m", U, cov, U)
    tol = krylov_tol(F64, COND)
    assert _rel(belief.var(U), expected) <= tol
    assert belief.var(U[:, 0]).shape == ()
    assert float(belief.var(U[:, 0])) == pytest.approx(float(expected[0]), rel=tol)
    down = torch.einsum("im,ij,jm->m", U, S0 - cov, U)
    assert _rel(belief.downdate_variance(U), down) <= tol
    assert belief.downdate_variance(U[:, 1]).shape == ()


def test_diagonal_and_trace_general_prior():
    p = _problem()
    belief = _belief(p, 5, prior=2.0)
    cov = belief.cov.to_dense()
    tol = exact_tol(F64, p.n)
    assert _rel(belief.diagonal(), torch.diagonal(cov)) <= tol
    assert float(belief.trace()) == pytest.approx(float(torch.trace(cov)), rel=tol)
    # an operator prior: diag(d)
    d = torch.linspace(1.0, 3.0, p.n, dtype=F64)
    belief = _belief(p, 5, prior=pn.linops.Diagonal(d))
    cov = belief.cov.to_dense()
    assert _rel(belief.diagonal(), torch.diagonal(cov)) <= tol
    assert float(belief.trace()) == pytest.approx(float(torch.trace(cov)), rel=tol)


def test_inverse_prior_diagonal_refuses_to_densify():
    belief = _belief(_problem(), 3)
    with pytest.raises(pn.MissingStructureError, match="to_dense"):
        belief.diagonal()
    with pytest.raises(pn.MissingStructureError):
        belief.trace()


def test_dense_operator_prior_matches_scaled_identity():
    p = _problem()
    a = _belief(p, 4, prior=2.0)
    b = _belief(p, 4, prior=Dense(2.0 * torch.eye(p.n, dtype=F64), is_symmetric=True))
    tol = exact_tol(F64, p.n)
    assert _rel(a.mean, b.mean) <= tol
    assert _rel(a.cov.to_dense(), b.cov.to_dense()) <= tol


def test_prior_operator_must_match_A():
    p = _problem()
    with pytest.raises(ValueError, match="does not match A"):
        _belief(p, 2, prior=Dense(torch.eye(p.n + 1, dtype=F64), is_symmetric=True))
    with pytest.raises(TypeError, match="cov must be"):
        GaussianPrior("big")
    assert repr(InversePrior()) == "InversePrior()"


def test_rank_and_repr():
    belief = _belief(_problem(), 3)
    assert belief.rank == 3
    assert "rank=3" in repr(belief) and "InversePrior" in repr(belief)


def test_direction_validation():
    belief = _belief(_problem(), 2)
    with pytest.raises(ValueError, match="directions must have shape"):
        belief.var(torch.ones(5, dtype=F64))
    with pytest.raises(TypeError, match="directions must have dtype"):
        belief.var(torch.ones(12, dtype=torch.float32))
    with pytest.raises(TypeError, match=r"directions must be a torch\.Tensor"):
        belief.downdate_variance([1.0] * 12)


def test_sample_argument_validation():
    belief = _belief(_problem(), 2, prior=1.0)
    for k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be a positive int"):
            belief.sample(k, torch.Generator())
    with pytest.raises(TypeError, match="generator"):
        belief.sample(3, generator=42)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(belief.sample(4, g1), belief.sample(4, g2))


def test_inverse_prior_samples_satisfy_the_observations():
    # Σ_i A S = 0: every sample x satisfies Sᵀ A x = Sᵀ b exactly (up to rounding)
    p = _problem()
    k = 4
    states = list(
        pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(k)).iterate(p.A, p.b)
    )
    S = torch.cat([s.action for s in states[1:]], dim=1)
    X = states[-1].belief.sample(50, torch.Generator().manual_seed(0))
    lhs = S.mT @ (p.A @ X)
    rhs = (S.mT @ p.b).unsqueeze(-1).expand_as(lhs)
    assert _rel(lhs, rhs) <= krylov_tol(F64, COND)


@pytest.mark.statistical
@pytest.mark.parametrize("prior", PRIORS)
def test_samples_have_the_belief_mean_and_covariance(prior):
    """Whitened samples are i.i.d. N(0, I) on the range of Σ_i and vanish off it.

    z-tests (normal approximation, 2000 draws) on each whitened coordinate's mean and
    second moment and on each pair's cross moment; the family-wise false-alarm level
    is ``FALSE_ALARM`` (Bonferroni).
    """
    n, k, draws = 6, 2, 2000
    p = _problem(n=n, seed=4)
    belief = _belief(p, k, prior)
    X = belief.sample(draws, torch.Generator().manual_seed(2024))
    assert X.shape == (n, draws) and X.dtype == F64
    cov = belief.cov.to_dense()
    lam, Q = torch.linalg.eigh(0.5 * (cov + cov.mT))
    tol = krylov_tol(F64, COND) * float(lam.max())
    on_range = lam > tol
    assert int(on_range.sum()) == n - k
    centred = X - belief.mean.unsqueeze(-1)
    # off the range: no spread at all
    off = float((Q[:, ~on_range].mT @ centred).abs().max())
    assert off <= krylov_tol(F64, COND) * float(centred.abs().max())
    Y = (Q[:, on_range].mT @ centred) / lam[on_range].sqrt().unsqueeze(-1)
    r = Y.shape[0]
    z_mean = Y.sum(1) / math.sqrt(draws)
    z_var = ((Y**2).sum(1) - draws) / math.sqrt(2 * draws)
    iu = torch.triu_indices(r, r, offset=1)
    z_cross = (Y[iu[0]] * Y[iu[1]]).sum(1) / math.sqrt(draws)
    z = torch.cat([z_mean, z_var, z_cross])
    threshold = statistical_threshold(FALSE_ALARM / z.numel())
    assert float(z.abs().max()) <= threshold, z
