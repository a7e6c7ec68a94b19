"""The one-pass NaN/Inf and symmetry check of stored matrices (``check_finite_symmetric``)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pnsolve.linops.symmetry import SYMMETRY_ROWS, check_finite_symmetric

F64 = torch.float64


def _reference(A: torch.Tensor) -> bool:
    tol = 100 * torch.finfo(A.dtype).eps * float(A.abs().max())
    return A.shape[0] == A.shape[1] and float((A - A.mT).abs().max()) <= tol


@given(
    n=st.integers(1, 2 * SYMMETRY_ROWS + 37),
    seed=st.integers(0, 2**16),
    skew=st.sampled_from([0.0, 1e-15, 1e-9, 1e-3]),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_agrees_with_the_dense_definition(n, seed, skew, dtype):
    """Symmetric iff ``max |A − Aᵀ| ≤ 100 eps max |A|``, on sizes across tile borders."""
    g = torch.Generator().manual_seed(seed)
    B = torch.randn(n, n, dtype=F64, generator=g)
    A = (B + B.mT + skew * torch.randn(n, n, dtype=F64, generator=g)).to(dtype)
    assert check_finite_symmetric(A, "A") == _reference(A)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize(("i", "j"), [(0, 0), (3, 400), (400, 3), (599, 599), (300, 257)])
def test_every_non_finite_entry_is_found_and_named(bad, i, j):
    A = torch.eye(600, dtype=F64)
    A[i, j] = bad
    kind = "NaN" if bad != bad else "Inf"
    with pytest.raises(ValueError, match=f"A contains {kind} values"):
        check_finite_symmetric(A, "A")


def test_rectangular_and_empty_matrices():
    assert check_finite_symmetric(torch.ones(3, 5, dtype=F64), "A") is False
    with pytest.raises(ValueError, match="Inf"):
        check_finite_symmetric(torch.full((3, 5), float("inf"), dtype=F64), "A")
    assert check_finite_symmetric(torch.zeros(0, 0, dtype=F64), "A") is True
