"""Interoperability with probnum: ``to_probnum`` and a comparison with probnum's solver."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import pnsolve as pn
from pnsolve.beliefs import probnum_interop
from pnsolve.problems import make_problem
from pnsolve.testing import exact_tol, krylov_tol, peer_tol

probnum_interop._ensure_numpy2_compat()
probnum = pytest.importorskip("probnum")

F64 = torch.float64
N, COND = 10, 10.0


@pytest.fixture(scope="module")
def problem():
    return make_problem("exponential", N, generator=torch.Generator().manual_seed(0), cond=COND)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _probnum_solve(problem, x0, maxiter):
    A, b = problem.A.to_dense().numpy(), problem.b.numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "reached the maximum number of iterations"
        x, _, _, info = probnum.linalg.problinsolve(
            A, b, x0=x0, maxiter=maxiter, atol=0.0, rtol=0.0
        )
    assert info["iter"] == maxiter
    return x


def _shared_x0(problem):
    # probnum replaces x0 = 0 by this "better initialisation"; start both solvers there
    A, b = problem.A.to_dense().numpy(), problem.b.numpy()
    return (b @ b) / (b @ A @ b) * b


def test_both_solvers_reach_the_solution_after_n_iterations(problem):
    x0 = _shared_x0(problem)
    ours, _info = pn.problinsolve(problem.A, problem.b, torch.as_tensor(x0), maxiter=N, rtol=0.0)
    theirs = _probnum_solve(problem, x0, N)
    x_true = problem.x_true.numpy()
    err_ours = _rel(ours.mean.numpy(), x_true)
    err_theirs = _rel(theirs.mean, x_true)
    assert err_ours <= krylov_tol(F64, COND)
    assert err_theirs <= peer_tol(F64)  # probnum's solver does not re-conjugate
    assert err_ours <= err_theirs
    assert _rel(ours.mean.numpy(), theirs.mean) <= peer_tol(F64)
    # the posterior covariance has collapsed in both
    assert float(np.abs(ours.cov.to_dense().numpy()).max()) <= krylov_tol(F64, COND)
    assert float(np.abs(theirs.cov.todense()).max()) <= krylov_tol(F64, COND)


def test_first_iteration_agrees_with_probnum(problem):
    # one observed direction (the residual): both are the same Gaussian conditioning
    x0 = _shared_x0(problem)
    ours, _ = pn.problinsolve(problem.A, problem.b, torch.as_tensor(x0), maxiter=1, rtol=0.0)
    theirs = _probnum_solve(problem, x0, 1)
    assert _rel(ours.mean.numpy(), theirs.mean) <= exact_tol(F64, N)


@pytest.mark.parametrize("prior", ["inverse", 2.0])
def test_to_probnum_returns_a_matching_normal(problem, prior):
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.CG(), pn.stopping.MaxIterations(4), prior=prior
    )
    belief, _ = solver.solve(problem.A, problem.b)
    cov = belief.cov.to_dense().numpy()
    for x in (belief.to_probnum(), probnum_interop.to_probnum(belief, dense=True)):
        assert isinstance(x, probnum.randvars.Normal)
        assert x.shape == (N,) and x.dtype == np.float64
        np.testing.assert_array_equal(x.mean, belief.mean.numpy())
        dense = x.cov.todense() if isinstance(x.cov, probnum.linops.LinearOperator) else x.cov
        assert _rel(dense, cov) <= exact_tol(F64, N)
        assert _rel(x.var, np.diag(cov)) <= krylov_tol(F64, COND)
    lazy = belief.to_probnum()
    assert isinstance(lazy.cov, probnum.linops.LinearOperator) and lazy.cov.is_symmetric
    v = np.linspace(-1.0, 1.0, N)
    assert _rel(lazy.cov @ v, cov @ v) <= krylov_tol(F64, COND)
    V = np.stack([v, v**2], axis=1)
    assert _rel(lazy.cov @ V, cov @ V) <= krylov_tol(F64, COND)
    dense = belief.to_probnum(dense=True)
    assert isinstance(dense.cov, np.ndarray)
    assert dense.sample(rng=np.random.default_rng(0), size=3).shape == (3, N)


def test_to_probnum_keeps_float32(problem):
    A = problem.A.to_dense().float()
    belief, _ = pn.problinsolve(A, problem.b.float(), maxiter=3, prior=1.0)
    x = belief.to_probnum(dense=True)
    assert x.mean.dtype == np.float64 and x.cov.dtype == np.float64
    lazy = belief.to_probnum()
    assert (lazy.cov @ np.ones(N)).dtype == np.float64


def test_numpy_shim_defines_only_the_missing_aliases():
    code = (
        "import numpy as np; before = set(np.__dict__);"
        "from pnsolve.beliefs.probnum_interop import _ensure_numpy2_compat;"
        "mid = set(np.__dict__); _ensure_numpy2_compat(); _ensure_numpy2_compat();"
        "print(sorted(mid - before), sorted(set(np.__dict__) - mid), np.float_ is np.float64)"
    )
    out = (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        assert out == "[] ['find_common_type', 'float_'] True"
    else:  # pragma: no cover - NumPy 1 already has both names
        assert out == "[] [] True"
