"""Problem zoo: eigenvalues equal the named spectrum, SPD, b = A x_true, errors."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.problems import PROBLEMS, SPECTRA, make_problem, spectrum
from pnsolve.testing import exact_tol

PARAMS = {
    "exponential": {"cond": 1e4},
    "polynomial": {"power": 1.5},
    "clustered": {"clusters": 3, "spread": 0.05},
    "rank_deficient": {"rank": 7, "jitter": 1e-3},
}


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(SPECTRA))
def test_eigenvalues_equal_named_spectrum(name, dtype):
    n = 30
    problem = make_problem(name, n, generator=gen(), dtype=dtype, **PARAMS[name])
    lam = spectrum(name, n, **PARAMS[name])
    A = problem.A.to_dense()
    assert isinstance(problem.A, pn.linops.Dense)
    assert problem.A.is_symmetric and problem.A.is_psd and A.dtype == dtype
    assert torch.equal(A, A.mT)
    torch.testing.assert_close(problem.spectrum, lam.to(dtype))
    eig = torch.linalg.eigvalsh(A.double()).flip(0)
    assert float((eig - lam).abs().max()) <= exact_tol(dtype, n) * float(lam.max())
    assert float(eig.min()) > 0
    # b = A x_true
    r = problem.residual(problem.x_true)
    scale = float(lam.max()) * float(problem.x_true.abs().max())
    assert float(r.abs().max()) <= exact_tol(dtype, n) * scale
    assert problem.b.dtype == problem.x_true.dtype == dtype


def test_spectra_definitions():
    n = 10
    torch.testing.assert_close(
        spectrum("exponential", n, rate=0.5), torch.exp(-0.5 * torch.arange(n, dtype=torch.float64))
    )
    lam = spectrum("exponential", n, cond=1e6, scale=2.0)
    assert float(lam[0]) == 2.0 and abs(float(lam[0] / lam[-1]) / 1e6 - 1) < 1e-12
    torch.testing.assert_close(
        spectrum("polynomial", n, power=2.0), torch.arange(1, n + 1, dtype=torch.float64) ** -2.0
    )
    rd = spectrum("rank_deficient", n, rank=3, jitter=1e-4)
    assert int((rd == 1e-4).sum()) == n - 3 and float(rd[0]) == 1 + 1e-4
    assert spectrum("exponential", 1).tolist() == [1.0]
    assert spectrum("rank_deficient", 4, rank=0, jitter=0.5).tolist() == [0.5] * 4
    f32 = spectrum("polynomial", 5, dtype=torch.float32)
    assert f32.dtype == torch.float32 and f32.shape == (5,)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_clustered_without_spread_has_exactly_k_distinct_eigenvalues(k):
    lam = spectrum("clustered", 25, clusters=k)
    assert torch.unique(lam).numel() == k
    problem = pn.problems.clustered(25, clusters=k, generator=gen())
    eig = torch.linalg.eigvalsh(problem.A.to_dense()).flip(0)
    assert float((eig - lam).abs().max()) <= exact_tol(torch.float64, 25)
    # a Krylov space of dimension k holds the solution: the minimal polynomial has degree k
    b = problem.b
    K = torch.stack([torch.linalg.matrix_power(problem.A.to_dense(), j) @ b for j in range(k)], 1)
    coef = torch.linalg.lstsq(K, problem.x_true[:, None]).solution
    assert float((K @ coef - problem.x_true[:, None]).norm()) <= 1e-6 * float(b.norm())


def test_clustered_explicit_centres_and_small_n():
    lam = spectrum("clustered", 6, clusters=[3.0, 1.0], spread=0.1)
    torch.testing.assert_close(
        lam, torch.tensor([3.3, 3.0, 2.7, 1.1, 1.0, 0.9], dtype=torch.float64)
    )
    assert spectrum("clustered", 2, clusters=3).numel() == 2


@pytest.mark.parametrize("kernel", ["rbf", "matern12", "matern32", "matern52"])
def test_kernel_gram_spectrum_and_solution(kernel):
    problem = pn.problems.kernel_gram(
        40, 2, kernel=kernel, noise=0.1, generator=gen(), rhs="gaussian"
    )
    A = problem.A.to_dense()
    torch.testing.assert_close(problem.spectrum, torch.linalg.eigvalsh(A).flip(0))
    assert float(problem.spectrum.min()) >= 0.1 * (1 - 1e-10)
    torch.testing.assert_close(torch.diagonal(A), torch.full((40,), 1.1, dtype=torch.float64))
    assert float(problem.residual(problem.x_true).abs().max()) <= exact_tol(torch.float64, 40) * 100
    assert pn.problems.kernel_gram(5, generator=gen(), compute_spectrum=False).spectrum is None


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_gaussian_rhs_multiple_columns_and_reproducible(name):
    a = make_problem(name, 12, generator=gen(4), rhs="gaussian", num_rhs=3)
    b = make_problem(name, 12, generator=gen(4), rhs="gaussian", num_rhs=3)
    assert a.b.shape == a.x_true.shape == (12, 3)
    assert torch.equal(a.A.to_dense(), b.A.to_dense()) and torch.equal(a.b, b.b)
    c = make_problem(name, 12, generator=gen(5), rhs="gaussian", num_rhs=3)
    assert not torch.equal(a.A.to_dense(), c.A.to_dense())
    scale = float(a.A.to_dense().abs().max()) * float(a.x_true.abs().max()) * 12
    assert float(a.residual(a.x_true).abs().max()) <= exact_tol(torch.float64, 12) * scale


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: spectrum("exponential", 0), "n must"),
        (lambda: spectrum("exponential", 5, cond=0.5), "cond"),
        (lambda: spectrum("exponential", 5, cond=10.0, rate=1.0), "cond or rate"),
        (lambda: spectrum("exponential", 5, rate=-1.0), "rate"),
        (lambda: spectrum("polynomial", 5, power=-1.0), "power"),
        (lambda: spectrum("clustered", 5, spread=1.0), "spread"),
        (lambda: spectrum("clustered", 5, clusters=0), "clusters"),
        (lambda: spectrum("clustered", 5, clusters=[1.0, -2.0]), "clusters"),
        (lambda: spectrum("rank_deficient", 5, rank=6), "rank"),
        (lambda: spectrum("rank_deficient", 5, rank=-1), "rank"),
        (lambda: spectrum("rank_deficient", 5, jitter=0.0), "jitter"),
        (lambda: spectrum("exponential", 5, scale=0.0), "scale"),
        (lambda: spectrum("nope", 5), "unknown spectrum name 'nope'"),
        (lambda: spectrum("kernel_gram", 5), "kernel_gram"),
        (lambda: make_problem("nope", 5, generator=gen()), "unknown problem name"),
        (lambda: pn.problems.kernel_gram(5, generator=gen(), kernel="cauchy"), "kernel"),
        (lambda: pn.problems.kernel_gram(5, generator=gen(), noise=0.0), "noise"),
        (lambda: pn.problems.exponential_decay(5, generator=gen(), rhs="ones"), "rhs"),
        (lambda: pn.problems.exponential_decay(5, generator=gen(), num_rhs=0), "num_rhs"),
    ],
)
def test_value_errors_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_type_errors():
    with pytest.raises(TypeError, match="generator"):
        pn.problems.polynomial_decay(5, generator=None)
    with pytest.raises(TypeError, match="dtype"):
        pn.problems.polynomial_decay(5, generator=gen(), dtype=torch.int64)
    with pytest.raises(TypeError, match="n must"):
        spectrum("polynomial", 5.0)
    with pytest.raises(TypeError, match="rank"):
        spectrum("rank_deficient", 5, rank=2.0)
