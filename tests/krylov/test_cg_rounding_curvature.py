"""Curvature at rounding level is a breakdown, clearly negative curvature is not SPD.

A product ``A p`` is accurate to about ``√n·eps·‖A‖‖p‖``, so ``pᵀAp`` within
``c·eps·‖A‖‖p‖²`` (``c = CURVATURE_BAND·√n``) carries no sign. On a numerically
singular positive semi-definite matrix with a right-hand side outside its range, CG's
directions grow along the null space until their curvature is exactly that: before,
``pn.cg`` raised ``NotPositiveDefiniteError`` there (``pᵀAp = −1e18`` at
``‖p‖ = 1e19``, ``‖A‖ = 1``); now the column stops as broken down.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.problems.zoo import rank_deficient_plus_jitter
from pnsolve.testing import eps, iterative_tol

F64 = torch.float64
N, RANK = 50, 40
#: ``B + jitter·I`` with ``B`` of rank 40: singular in float64
SINGULAR_JITTER = eps(F64) ** 2
MAXITER = 6 * N


def _singular(seed: int) -> pn.problems.LinearSystem:
    return rank_deficient_plus_jitter(
        N, rank=RANK, jitter=SINGULAR_JITTER, generator=torch.Generator().manual_seed(seed),
        rhs="gaussian",
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(4))
def test_cg_on_a_singular_psd_matrix_breaks_down_instead_of_claiming_not_spd(seed):
    p = _singular(seed)
    x, info = pn.cg(p.A, p.b, rtol=iterative_tol(F64), maxiter=MAXITER)
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    assert bool(torch.isfinite(x).all())


def test_clearly_negative_curvature_still_raises():
    p = _singular(0)
    lam, Q = torch.linalg.eigh(p.A.to_dense())
    indefinite = (Q * torch.where(lam > lam.max() / 2, -lam, lam)) @ Q.mT  # λ_max flipped
    with pytest.raises(pn.NotPositiveDefiniteError, match="negative curvature"):
        pn.cg(0.5 * (indefinite + indefinite.mT), p.b, rtol=iterative_tol(F64), maxiter=MAXITER)
