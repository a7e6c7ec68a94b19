"""Calibration of affine iterative methods' beliefs, GP-level and solver-level (issue 14 item 7).

An affine method returns ``x_m = P_m b`` with ``P_m`` fixed by ``A`` and ``m``: the
error ``x* − x_m = (I − P_m A) x*`` is linear in the solution, so on solutions drawn
from the prior the belief ``N(x_m, E Σ₀ Eᵀ)`` is exact (Hegde, Adil & Cockayne 2025).

* **GP level** (:class:`pnsolve.gp.AffineGP`): on draws from the GP prior (``N`` inputs
  and ``T`` test points uniform in ``[0, 1]²``, Matérn-3/2, noise ``σ² = 0.1``,
  float64) the standardised errors of :func:`pnsolve.metrics.prior_draw_calibration`
  are standard normal in the computational and the combined variance, for symmetric
  Gauss–Seidel, Jacobi, Chebyshev and forward (non-symmetric ``P_m``) cyclic block
  projections, after few and after more sweeps. Measured ``E[z²]`` 0.97–1.04
  (standard errors 0.03–0.09) and coverage₉₅ 0.943–0.956.
* **Solver level** (:func:`pnsolve.iterative.affine_solve`): ``x* ~ N(0, Σ₀)``,
  ``b = A x*``. ``Σ_m = E Σ₀ Eᵀ`` does not depend on ``b``, so its eigenvectors ``U``
  are fixed before the draws and ``Σ_j (u_jᵀ e)² / μ_j`` over any fixed set of them is
  exactly ``χ²`` with that many degrees of freedom. ``E`` is often numerically
  singular (Gauss–Seidel's iteration matrix has a zero column; converged
  eigencomponents), and there both ``μ_j`` and ``u_jᵀ e`` are rounding, so the
  statistic keeps the ``r`` eigenvalues above ``√eps · μ_max`` (measured ``r`` 13–30 of
  30). :func:`pnsolve.testing.calibration.whitened_error_statistics` is the same
  statistic for action policies (it runs the probabilistic solver, which affine methods
  do not use). Measured ``z`` between +0.4 and +2.2 (the 24 checks share their draws;
  with 1000 draws on other seeds ``|z|`` ≤ 1.1).

Each check is a two-sided z-test at false-alarm level ``FALSE_ALARM``; with 56 such
checks in this module the family-wise false-alarm level is at most ≈ 56 × 1e-4 ≈ 6e-3
(the seeds are fixed, so the outcome is deterministic).
"""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.iterative import (
    Chebyshev,
    CyclicProjections,
    GaussSeidel,
    JacobiIteration,
    affine_solve,
)
from pnsolve.metrics import prior_draw_calibration
from pnsolve.problems import make_problem
from pnsolve.testing import eps, statistical_threshold
from pnsolve.testing.calibration import assert_calibrated

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
FALSE_ALARM = 1e-4  # per check (two-sided)
Z = statistical_threshold(FALSE_ALARM)
LEVEL = 0.95  # the coverage level checked

# GP-level study settings
N, T, DRAWS = 150, 40, 150
KERNEL = pn.kernels.Matern(nu=1.5, lengthscale=0.3)
NOISE = 0.1
SWEEPS = (2, 10)
BLOCK = 32  # cyclic projections: 5 blocks of 32 rows at N = 150

GP_METHODS = {
    "gauss_seidel": lambda m: GaussSeidel(m),
    "jacobi": lambda m: JacobiIteration(m),
    "chebyshev": lambda m: Chebyshev(m, lower=NOISE),  # λ_min(K̂) ≥ σ²
    "cyclic_projections": lambda m: CyclicProjections(m, block_size=BLOCK),
}

# solver-level study settings (as tests/statistical/test_calibration.py)
N_SOLVE, SOLVE_DRAWS, SIGMA2 = 30, 200, 0.5
SOLVE_SWEEPS = (2, 8)
SOLVE_METHODS = {
    "gauss_seidel": lambda m: GaussSeidel(m, block_size=7),
    "gauss_seidel_forward": lambda m: GaussSeidel(m, symmetric=False),
    "jacobi": lambda m: JacobiIteration(m),
    "chebyshev": lambda m: Chebyshev(m),
    "cyclic_projections": lambda m: CyclicProjections(m, block_size=6),
    "cyclic_projections_symmetric": lambda m: CyclicProjections(m, block_size=6, symmetric=True),
}
#: Eigenvalues of Σ_m below this fraction of the largest are at rounding level.
RANK_CUTOFF = math.sqrt(eps(F64))


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.rand(N, 2, generator=g, dtype=F64), torch.rand(T, 2, generator=g, dtype=F64)


@pytest.mark.statistical
@pytest.mark.parametrize("sweeps", SWEEPS)
@pytest.mark.parametrize("name", sorted(GP_METHODS))
def test_affine_gp_is_calibrated(name, sweeps):
    X, Xs = _inputs()
    flags, last = set(), []

    def posterior(X, y, Xs):
        gp = pn.gp.AffineGP(KERNEL, NOISE, GP_METHODS[name](sweeps), backend="dense")
        with torch.no_grad():
            post = gp.fit(X, y).posterior(Xs)
        flags.add(post.calibrated)
        last[:] = [post]
        return post

    stats = prior_draw_calibration(
        KERNEL, NOISE, X, Xs, posterior, draws=DRAWS, generator=torch.Generator().manual_seed(1)
    )
    assert flags == {True}
    for kind in ("computational", "combined"):
        assert_calibrated(stats[kind], Z, LEVEL)
    # the computation left uncertainty at every test point of every draw ...
    assert stats["computational"].excluded == 0
    # ... and the library's own split of the variance is non-negative
    with torch.no_grad():
        assert float(last[0].comp_var.min()) >= 0.0


def _solver_problem() -> torch.Tensor:
    A = make_problem("exponential", N_SOLVE, generator=torch.Generator().manual_seed(0), cond=1e2).A
    return A.to_dense()


@pytest.mark.statistical
@pytest.mark.parametrize("prior", ["inverse", SIGMA2])
@pytest.mark.parametrize("sweeps", SOLVE_SWEEPS)
@pytest.mark.parametrize("name", sorted(SOLVE_METHODS))
def test_affine_solve_belief_is_calibrated_on_solutions_drawn_from_the_prior(name, sweeps, prior):
    A = _solver_problem()
    lam, Q = torch.linalg.eigh(A)
    if prior == "inverse":
        root = Q * lam.rsqrt()  # (A⁻¹)^{1/2} up to an orthogonal factor
    else:
        root = math.sqrt(prior) * torch.eye(N_SOLVE, dtype=F64)
    method = SOLVE_METHODS[name](sweeps)
    g = torch.Generator().manual_seed(11)
    basis = None
    total = 0.0
    for _ in range(SOLVE_DRAWS):
        x = root @ torch.randn(N_SOLVE, generator=g, dtype=F64)
        belief, _ = affine_solve(A, A @ x, method, prior=prior)
        assert belief.calibrated
        if basis is None:  # Σ_m depends on A, m and Σ₀ only: one eigendecomposition
            cov = belief.cov.to_dense()
            mu, U = torch.linalg.eigh(0.5 * (cov + cov.mT))
            keep = mu > RANK_CUTOFF * mu[-1]
            basis, mu = U[:, keep], mu[keep]
        w = basis.mT @ (x - belief.mean)
        total += float((w * w / mu).sum())
    r = basis.shape[1]
    assert r > 0
    dof = r * SOLVE_DRAWS
    z = (total - dof) / math.sqrt(2 * dof)
    assert abs(z) <= Z, (z, r, total / SOLVE_DRAWS)
