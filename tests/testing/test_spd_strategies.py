"""The hypothesis strategies draw valid, reproducible SPD systems."""

from __future__ import annotations

import torch
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from pnsolve.problems import LinearSystem
from pnsolve.testing import exact_tol
from pnsolve.testing.strategies import SPECTRUM_NAMES, rhs, spd_matrices, spd_problems


@given(spd_problems(max_cond=1e4, num_rhs=st.none() | st.integers(1, 3)))
def test_spd_problems_are_valid_systems(problem):
    assert isinstance(problem, LinearSystem)
    A = problem.A.to_dense()
    n = problem.n
    assert 2 <= n <= 40 and A.shape == (n, n) and torch.equal(A, A.mT)
    assert problem.A.is_psd and problem.A.is_symmetric
    eig = torch.linalg.eigvalsh(A).flip(0)
    lam = problem.spectrum
    assert float(eig.min()) > 0
    assert float((eig - lam).abs().max()) <= exact_tol(A.dtype, n) * float(lam.max())
    assert problem.cond <= 1e4 * (1 + 1e-9)
    scale = float(lam.max()) * float(problem.x_true.abs().max())
    assert float(problem.residual(problem.x_true).abs().max()) <= exact_tol(A.dtype, n) * scale


@given(
    spd_problems(
        n=st.integers(3, 8),
        spectra=("clustered", "rank_deficient"),
        dtypes=(torch.float32, torch.float64),
        max_cond=100.0,
        rhs_kind=("solution", "gaussian"),
    )
)
def test_spd_problems_respect_their_options(problem):
    assert 3 <= problem.n <= 8
    assert problem.A.dtype in (torch.float32, torch.float64)
    assert problem.name.split("(")[0] in ("clustered", "rank_deficient")
    assert problem.cond <= 100.0 * (1 + 1e-6)


@given(spd_matrices(n=6, spectra=("exponential",)))
def test_spd_matrices_are_symmetric_positive_definite(A):
    assert A.shape == (6, 6) and torch.equal(A, A.mT)
    assert float(torch.linalg.eigvalsh(A).min()) > 0


@given(rhs(st.integers(1, 10), num_rhs=st.none() | st.integers(1, 4), dtypes=(torch.float32,)))
def test_rhs_shapes(b):
    assert b.dtype == torch.float32 and b.ndim in (1, 2) and 1 <= b.shape[0] <= 10


def _collect(strategy) -> list:
    drawn: list = []

    @seed(1234)
    @settings(derandomize=False, database=None, max_examples=10)
    @given(strategy)
    def collect(problem):
        drawn.append(problem)

    collect()
    return drawn


def test_same_hypothesis_seed_gives_the_same_problems():
    first, second = _collect(spd_problems(n=5)), _collect(spd_problems(n=5))
    assert [p.name for p in first] == [p.name for p in second]
    assert all(torch.equal(p.A.to_dense(), q.A.to_dense()) for p, q in zip(first, second))
    assert {p.name.split("(")[0] for p in first} <= set(SPECTRUM_NAMES)
