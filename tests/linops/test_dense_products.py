"""``Dense``'s product rule (``dense_matmat``) and the probe of ``check_finite_symmetric``.

The two-thread row-split product must equal torch's ``A @ X`` to rounding and must
leave autograd, functorch and non-CPU cases on torch's path; the probe used for large
matrices must catch NaN/Inf anywhere and clear asymmetries, and never refuse a matrix
that the exact rule accepts.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.linops import dense as dense_mod
from pnsolve.linops import symmetry
from pnsolve.linops.dense import FAST_MIN_ELEMENTS, Dense, dense_matmat
from pnsolve.testing import exact_tol

F64, F32 = torch.float64, torch.float32
N_FAST = int(FAST_MIN_ELEMENTS**0.5) + 1  # smallest square size on the fast path
N_PROBE = symmetry.PROBE_MIN_ROWS


@pytest.fixture(scope="module")
def big64() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    B = torch.randn(N_FAST, N_FAST, generator=g, dtype=F64)
    return B + B.mT


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 16])
def test_fast_path_equals_torch_to_exact_tol(dtype, k, monkeypatch):
    monkeypatch.setattr(dense_mod, "FAST_MIN_ELEMENTS", 1)  # small sizes on the fast path
    monkeypatch.setattr(dense_mod, "FAST_COLUMNS", {F64: range(1, 5), F32: range(1, 5)})
    g = torch.Generator().manual_seed(k)
    for m, n in [(2, 3), (7, 7), (301, 200), (512, 513)]:
        A = torch.randn(m, n, generator=g, dtype=F64).to(dtype)
        X = torch.randn(n, k, generator=g, dtype=F64).to(dtype)
        fast = k in dense_mod.FAST_COLUMNS[dtype] and torch.get_num_threads() >= 2
        assert (dense_mod._product_path(A, X) != "torch") == fast
        out = dense_matmat(A, X)
        assert out.shape == (m, k) and out.dtype == dtype and out.is_contiguous()
        assert _rel(out, A @ X) <= exact_tol(dtype, n)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(2, 300),
    n=st.integers(1, 300),
    k=st.integers(1, 4),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([F32, F64]),
)
def test_fast_path_property(m, n, k, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(m, n, generator=g, dtype=F64).to(dtype)
    X = torch.randn(n, k, generator=g, dtype=F64).to(dtype)
    old = dense_mod.FAST_MIN_ELEMENTS, dense_mod.FAST_COLUMNS
    dense_mod.FAST_MIN_ELEMENTS, dense_mod.FAST_COLUMNS = 1, {F64: range(1, 5), F32: range(1, 5)}
    try:
        out = dense_matmat(A, X)
    finally:
        dense_mod.FAST_MIN_ELEMENTS, dense_mod.FAST_COLUMNS = old
    assert _rel(out, A @ X) <= exact_tol(dtype, n)


def test_large_dense_operator_products(big64):
    A = Dense(big64, is_symmetric=True)
    x = torch.randn(N_FAST, dtype=F64, generator=torch.Generator().manual_seed(3))
    assert _rel(A @ x, big64 @ x) <= exact_tol(F64, N_FAST)
    X = torch.randn(N_FAST, 2, dtype=F64, generator=torch.Generator().manual_seed(4))
    assert _rel(A.matmat(X), big64 @ X) <= exact_tol(F64, N_FAST)


def test_autograd_functorch_and_layouts_keep_torchs_path(big64):
    x = torch.randn(N_FAST, 1, dtype=F64)
    assert (dense_mod._product_path(big64, x) != "torch") == (torch.get_num_threads() >= 2)
    assert dense_mod._product_path(big64.requires_grad_(True), x) == "torch"
    big64.requires_grad_(False)
    assert dense_mod._product_path(big64, x.clone().requires_grad_(True)) == "torch"
    assert dense_mod._product_path(big64.mT, x) == "torch"  # not contiguous
    assert dense_mod._product_path(big64, torch.randn(N_FAST, 3, dtype=F64)) == "torch"
    assert (dense_mod._product_path(big64.float(), x.float()) != "torch") == (
        torch.get_num_threads() >= 2
    )
    if torch.get_num_threads() >= 2:
        assert dense_mod._product_path(big64.float(), torch.ones(N_FAST, 2)) != "torch"
    assert dense_mod._product_path(big64[:10, :10], x[:10]) == "torch"  # small
    assert dense_mod._product_path(big64, x.float()) == "torch"

    # gradients flow (torch's path): d/dx sum(A x) = Aᵀ 1
    xg = torch.randn(N_FAST, dtype=F64, requires_grad=True)
    Dense(big64, is_symmetric=True).matvec(xg).sum().backward()
    assert _rel(xg.grad, big64.sum(0)) <= exact_tol(F64, N_FAST)

    # functorch transforms see torch's path (vmap over right-hand sides)
    vs = torch.randn(3, N_FAST, dtype=F64)
    out = torch.func.vmap(lambda v: dense_matmat(big64, v.unsqueeze(-1)).squeeze(-1))(vs)
    assert _rel(out, vs @ big64.mT) <= exact_tol(F64, N_FAST)


def test_one_thread_keeps_torchs_path(big64, torch_threads):
    with torch_threads(1):
        assert dense_mod._product_path(big64, torch.ones(N_FAST, 1, dtype=F64)) == "torch"


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("k", [1, 2])
def test_numpy_path_equals_torch_within_its_bounds(dtype, k, monkeypatch, torch_threads):
    n = int(dense_mod.NUMPY_MIN_ELEMENTS**0.5) + 1
    g = torch.Generator().manual_seed(k)
    A = torch.randn(n, n, generator=g, dtype=F64).to(dtype)
    X = torch.randn(n, k, generator=g, dtype=F64).to(dtype)
    two = torch.get_num_threads() >= 2
    assert (dense_mod._product_path(A, X) == "numpy") == two
    out = dense_matmat(A, X)
    assert out.shape == (n, k) and out.dtype == dtype and out.device == A.device
    assert _rel(out, A @ X) <= exact_tol(dtype, n)
    # outside the bounds: below the minimum, above the byte limit, autograd, one thread
    assert dense_mod._product_path(A[: n // 2], X) != "numpy"
    monkeypatch.setattr(dense_mod, "NUMPY_MAX_BYTES", A.numel() * A.element_size() - 1)
    assert dense_mod._product_path(A, X) != "numpy"
    monkeypatch.undo()
    assert dense_mod._product_path(A, X.clone().requires_grad_(True)) == "torch"
    with torch_threads(1):
        assert dense_mod._product_path(A, X) == "torch"


def test_numpy_path_result_is_independent_of_its_inputs():
    n = int(dense_mod.NUMPY_MIN_ELEMENTS**0.5) + 1
    A = torch.ones(n, n, dtype=F64)
    x = torch.ones(n, 1, dtype=F64)
    out = dense_matmat(A, x)
    A.zero_()
    x.zero_()
    assert float(out.min()) == n  # a fresh tensor, not a view of either input


# ------------------------------------------------------------------------ probe
def _sym(n: int, seed: int, dtype=F64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    B = torch.randn(n, n, generator=g, dtype=F64)
    return (B + B.mT).to(dtype)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_probe_accepts_symmetric_matrices_without_the_exact_pass(dtype, monkeypatch):
    calls = []
    monkeypatch.setattr(symmetry, "_exact", lambda *a: calls.append(1) or False)
    g = torch.Generator().manual_seed(0)
    X = torch.rand(N_PROBE, 3, generator=g, dtype=F64)
    kernel = torch.exp(-(torch.cdist(X, X) ** 2)) + 0.1 * torch.eye(N_PROBE, dtype=F64)
    for A in [_sym(N_PROBE, 1), kernel, torch.ones(N_PROBE, N_PROBE, dtype=F64)]:
        assert symmetry.check_finite_symmetric(A.to(dtype), "A") is True
    assert calls == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize(("i", "j"), [(0, 0), (3, 1000), (1000, 3), (1023, 1023), (512, 7)])
def test_probe_finds_and_names_every_non_finite_entry(bad, i, j):
    A = torch.eye(N_PROBE, dtype=F64)
    A[i, j] = bad
    kind = "NaN" if bad != bad else "Inf"
    with pytest.raises(ValueError, match=f"A contains {kind} values"):
        symmetry.check_finite_symmetric(A, "A")
    with pytest.raises(ValueError, match=f"A contains {kind} values"):
        pn.cg(A, torch.ones(N_PROBE, dtype=F64))


def test_probe_overflow_of_finite_matrix_falls_back_to_the_exact_check():
    A = torch.full((N_PROBE, N_PROBE), 1e307, dtype=F64)  # products overflow
    assert symmetry.check_finite_symmetric(A, "A") is True
    A[0, 5] = -1e307
    assert symmetry.check_finite_symmetric(A, "A") is False


def _perturbations(n: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    E = torch.zeros(n, n, dtype=F64)
    E[3, n - 5] = 1.0
    L = torch.zeros(n, n, dtype=F64)
    L[:, 0] = torch.randn(n, generator=g, dtype=F64)
    return {
        "dense": torch.randn(n, n, generator=g, dtype=F64),
        "one entry": E,
        "one column": L,
        "low rank": torch.randn(n, 1, generator=g, dtype=F64)
        @ torch.randn(1, n, generator=g, dtype=F64),
    }


@pytest.mark.parametrize("dtype", [F32, F64])
def test_probe_detection_rate_at_100x_and_1000x_its_stated_resolution(dtype):
    """``‖A − Aᵀ‖_F = f · 32 eps √n ‖A‖_F``: refused in ≥ 95 % of 200 cases at f = 100
    (50 matrices × 4 kinds of perturbation), in every case at f = 1 000."""
    n = N_PROBE
    eps = torch.finfo(dtype).eps
    caught = {100: 0, 1000: 0}
    for seed in range(50):
        g = torch.Generator().manual_seed(seed)
        A = _sym(n, seed)
        for P in _perturbations(n, g).values():
            S = P - P.mT
            for f in caught:
                size = f * symmetry.PROBE_SAFETY * eps * n**0.5 * float(A.norm())
                B = (A + P * (size / float(S.norm()))).to(dtype)
                caught[f] += symmetry.check_finite_symmetric(B, "A") is False
    assert caught[1000] == 200
    assert caught[100] >= 190, caught


def test_asymmetric_large_matrix_is_refused_by_cg_naming_A():
    A = _sym(N_PROBE, 0) + 1e-3 * torch.randn(N_PROBE, N_PROBE, dtype=F64)
    with pytest.raises(ValueError, match="A must be symmetric"):
        pn.cg(A, torch.ones(N_PROBE, dtype=F64))


def test_probe_is_deterministic():
    A = _sym(N_PROBE, 5)
    A[0, 1] += 1e-9
    first = symmetry.check_finite_symmetric(A, "A")
    assert all(symmetry.check_finite_symmetric(A, "A") == first for _ in range(3))


def test_check_restores_the_thread_count():
    threads = torch.get_num_threads()
    symmetry.check_finite_symmetric(_sym(300, 0), "A")
    assert torch.get_num_threads() == threads
