"""Property tests (hypothesis): the belief's covariance stays PSD and only contracts.

General prior ``σ² I``: ``Σ_i`` is PSD and ``tr Σ_i`` never increases. Inverse prior:
``uᵀ Σ_i u`` never increases along fixed directions and ``C_i ≼ A⁻¹`` (the
eigenvalues of ``A^{1/2} C_i A^{1/2}`` are at most ``1``). Over SPD systems with
named spectra, in float64 and float32.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.stopping import MaxIterations
from pnsolve.testing import exact_tol, krylov_tol
from pnsolve.testing.strategies import spd_problems

MAX_COND = 1e3
DTYPES = (torch.float64, torch.float32)


def _states(problem, iterations, prior):
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(iterations), prior=prior)
    return list(solver.iterate(problem.A, problem.b))


#: Under σ²I the conditioning runs on Zᵀ Σ₀ Z = σ² Sᵀ A² S, whose condition number is
#: cond(A)²: float32 gets better-conditioned systems to keep the check meaningful.
GENERAL_MAX_COND = {torch.float64: MAX_COND, torch.float32: 10.0}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@given(data=st.data(), sigma2=st.sampled_from((0.1, 1.0, 10.0)))
def test_general_prior_covariance_psd_and_trace_decreasing(dtype, data, sigma2):
    max_cond = GENERAL_MAX_COND[dtype]
    problem = data.draw(spd_problems(n=st.integers(2, 30), dtypes=(dtype,), max_cond=max_cond))
    n = problem.n
    states = _states(problem, n, sigma2)
    traces = [float(s.belief.trace()) for s in states]
    assert abs(traces[0] - n * sigma2) <= exact_tol(dtype, n) * n * sigma2
    tol = krylov_tol(dtype, max_cond**2) * sigma2
    for before, after in itertools.pairwise(traces):
        assert after <= before + tol * n
    for state in (states[len(states) // 2], states[-1]):
        cov = state.belief.cov.to_dense().double()
        lam = torch.linalg.eigvalsh(0.5 * (cov + cov.mT))
        assert float(lam.min()) >= -tol, (state.iteration, float(lam.min()))
        assert float(lam.max()) <= sigma2 + tol
        assert bool(torch.isfinite(state.belief.mean).all())


@given(problem=spd_problems(n=st.integers(2, 12), dtypes=DTYPES, max_cond=MAX_COND))
def test_inverse_prior_variance_non_increasing(problem):
    dtype, n = problem.A.dtype, problem.n
    g = torch.Generator().manual_seed(n)
    U = torch.randn(n, 3, generator=g, dtype=torch.float64).to(dtype)
    states = _states(problem, n, "inverse")
    var = torch.stack([s.belief.var(U) for s in states])  # (iterations + 1, 3)
    tol = krylov_tol(dtype, MAX_COND) * var[0]
    assert bool((var[1:] <= var[:-1] + tol).all())
    assert bool((var >= 0).all())


@pytest.mark.slow
@given(problem=spd_problems(n=st.integers(2, 30), dtypes=DTYPES, max_cond=MAX_COND))
def test_inverse_approx_below_inverse(problem):
    dtype, n = problem.A.dtype, problem.n
    A = problem.A.to_dense().double()
    lam, Q = torch.linalg.eigh(A)
    root = Q @ torch.diag(lam.clamp_min(0).sqrt()) @ Q.mT
    for state in _states(problem, n, "inverse")[1:]:
        C = state.belief.inverse_approx.to_dense().double()
        eig = torch.linalg.eigvalsh(root @ C @ root)
        assert float(eig.max()) <= 1 + krylov_tol(dtype, MAX_COND), state.iteration
        assert float(eig.min()) >= -krylov_tol(dtype, MAX_COND), state.iteration
