"""Input conversion at every front door.

Complex inputs were cast to real and the solve "converged" on the wrong system;
symmetric torch sparse matrices were refused as non-symmetric; NaN/Inf in ``A`` read
as "not symmetric"; ``n = 0`` crashed inside torch; float16 failed with "A @ p
produced NaN"; ``ScaledIdentity(n, s)`` without a dtype could not be added to a float64
operator; ``problinsolve`` with a matrix ``b`` gave a generic shape error; rank
arguments above ``n`` raised in one place and were capped in others.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

import pnsolve as pn
from pnsolve.testing import iterative_tol

F64, F32 = torch.float64, torch.float32


def _spd(n=12, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(n, n, generator=g, dtype=F64)
    return (M @ M.mT / n + torch.eye(n, dtype=F64)).to(dtype)


def _entry_points():
    """Every front door that takes an operator ``A`` and a right-hand side."""
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(5))
    g = torch.Generator().manual_seed(0)
    return {
        "cg": lambda A, b: pn.cg(A, b),
        "lanczos": lambda A, b: pn.lanczos(A, b, 3),
        "pls": lambda A, b: solver.solve(A, b),
        "problinsolve": lambda A, b: pn.problinsolve(A, b),
        "ulisse": lambda A, b: pn.randomized.ulisse(A, b, alpha=2, beta=1.0, generator=g),
    }


# ----------------------------------------------------------------------- complex
def _complex_forms(A: torch.Tensor):
    Ac = A.to(torch.complex128)
    return {
        "torch": Ac,
        "numpy": Ac.numpy(),
        "scipy sparse": sp.csr_matrix(Ac.numpy()),
        "scipy LinearOperator": spla.aslinearoperator(Ac.numpy()),
        "torch sparse": Ac.to_sparse(),
    }


@pytest.mark.parametrize("form", list(_complex_forms(_spd())))
def test_complex_operators_are_refused_naming_the_argument(form):
    A = _complex_forms(_spd())[form]
    with pytest.raises(TypeError, match="obj must be real"):
        pn.linops.as_linop(A)
    with pytest.raises(TypeError, match="A must be real"):
        pn.cg(A, torch.ones(12, dtype=F64))


def test_scipy_complex_symmetric_pd_case_is_refused_not_solved_as_real():
    # scipy's "rand-cmplx-sym-pd" test matrix: before, the imaginary part was dropped,
    # the run reported CONVERGED and the true residual was 19.0 for ‖b‖ = 14.3.
    rng = np.random.default_rng(1234)
    M = rng.random((40, 40)) + 1j * rng.random((40, 40))
    A = M @ M.conj().T + 40 * np.eye(40)
    b = rng.random(40) + 1j * rng.random(40)
    with pytest.raises(TypeError, match="A must be real"):
        pn.cg(A, b)
    with pytest.raises(TypeError, match="b must be real"):
        pn.cg(_spd(40), b)


@pytest.mark.parametrize("name", list(_entry_points()))
def test_complex_right_hand_sides_are_refused_everywhere(name):
    b = torch.ones(12, dtype=torch.complex128)
    with pytest.raises(TypeError, match=r"(b|v) must be real"):
        _entry_points()[name](_spd(), b)


# ----------------------------------------------------------------------- sparse
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_symmetric_torch_sparse_matrices_are_accepted(layout):
    A = _spd(20)
    A = A * (A.abs() > 0.05)  # a sparse symmetric positive definite matrix
    S = A.to_sparse() if layout == "coo" else A.to_sparse_csr()
    b = torch.linspace(-1, 1, 20, dtype=F64)
    x, info = pn.cg(S, b, rtol=iterative_tol(F64))
    assert info.success
    torch.testing.assert_close(x, torch.linalg.solve(A, b), rtol=1e-8, atol=1e-8)
    assert pn.linops.as_linop(S).is_symmetric


def test_non_symmetric_torch_sparse_matrix_is_still_refused():
    A = _spd(10)
    A[0, 5] += 1.0
    with pytest.raises(ValueError, match="symmetric"):
        pn.cg(A.to_sparse(), torch.ones(10, dtype=F64))


# ----------------------------------------------------------------------- NaN / Inf
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("form", ["torch", "numpy", "scipy sparse", "torch sparse"])
def test_nan_or_inf_inside_A_is_reported_as_such(bad, form):
    A = _spd(8)
    A[2, 3] = A[3, 2] = bad
    obj = {
        "torch": A,
        "numpy": A.numpy(),
        "scipy sparse": sp.csr_matrix(A.numpy()),
        "torch sparse": A.to_sparse(),
    }[form]
    word = "NaN" if bad != bad else "Inf"
    with pytest.raises(ValueError, match=f"A contains {word}"):
        pn.cg(obj, torch.ones(8, dtype=F64))


# ----------------------------------------------------------------------- n = 0
@pytest.mark.parametrize("name", list(_entry_points()))
def test_empty_systems_are_refused_with_a_clear_message(name):
    with pytest.raises(ValueError, match="A is empty"):
        _entry_points()[name](torch.zeros(0, 0, dtype=F64), torch.zeros(0, dtype=F64))


# ----------------------------------------------------------------------- half precision
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_an_unsupported_dtype(dtype):
    A = _spd().to(dtype)
    with pytest.raises(TypeError, match="A has unsupported dtype"):
        pn.cg(A, torch.ones(12, dtype=dtype))
    with pytest.raises(TypeError, match="b has unsupported dtype"):
        pn.cg(_spd(), torch.ones(12, dtype=dtype))
    with pytest.raises(TypeError, match="X1 has unsupported dtype"):
        pn.kernels.RBF()(torch.zeros(3, 2, dtype=dtype))


def test_numpy_float16_is_an_unsupported_dtype():
    with pytest.raises(TypeError, match="A has unsupported dtype float16"):
        pn.cg(_spd().numpy().astype(np.float16), np.ones(12))


# ----------------------------------------------------------------------- sums
@pytest.mark.parametrize("dtype", [F64, F32])
def test_scaled_identity_without_dtype_adopts_its_partner(dtype):
    K = pn.linops.as_linop(_spd(dtype=dtype))
    v = torch.ones(12, dtype=dtype)
    for A in (
        K + pn.linops.ScaledIdentity(12, 0.5),
        pn.linops.ScaledIdentity(12, 0.5) + K,
        K - pn.linops.ScaledIdentity(12, 0.5),
    ):
        assert A.dtype == dtype
    torch.testing.assert_close((K + pn.linops.ScaledIdentity(12, 0.5)) @ v, K @ v + 0.5 * v)
    torch.testing.assert_close((K - pn.linops.ScaledIdentity(12, 0.5)) @ v, K @ v - 0.5 * v)


def test_scaled_identity_with_an_explicit_dtype_still_must_match():
    K = pn.linops.as_linop(_spd())
    with pytest.raises((TypeError, ValueError), match="dtype"):
        K + pn.linops.ScaledIdentity(12, 0.5, dtype=F32)


# ----------------------------------------------------------------------- problinsolve
def test_problinsolve_with_several_right_hand_sides_says_what_to_do():
    with pytest.raises(ValueError, match=r"one at a time.*pn\.cg"):
        pn.problinsolve(_spd(), torch.ones(12, 3, dtype=F64))


# ----------------------------------------------------------------------- rank rule
def test_rank_arguments_above_n_are_capped_at_n_everywhere():
    A = _spd(15)
    full = pn.preconditioners.PivotedCholesky(A, 15)
    over = pn.preconditioners.PivotedCholesky(A, 40)
    torch.testing.assert_close(over.L, full.L)
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    assert pn.preconditioners.Nystrom(A, 40, generator=g()).rank == 15
    assert pn.lanczos(A, torch.ones(15, dtype=F64), 40).Q.shape[1] <= 15
    X = torch.linspace(0, 1, 15, dtype=F64).unsqueeze(-1)
    gp = pn.gp.ExactGP(pn.kernels.RBF(lengthscale=0.3), noise=0.1).fit(X, torch.sin(6 * X[:, 0]))
    with torch.no_grad():
        love = gp.posterior(X, method="love", rank=40)
        exact = gp.posterior(X)
    torch.testing.assert_close(love.var, exact.var, rtol=1e-8, atol=1e-10)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="rank"):
            pn.preconditioners.PivotedCholesky(A, bad)
