"""The belief update tells rounding from negative curvature (inverse prior).

Two sources make a computed ``Cᵀ A C`` negative for an SPD (or semi-definite) ``A``:

* rounding of the product on near-null directions: within ``c·eps·‖A‖‖C‖²``
  (``c = CURVATURE_BAND·√n``) the curvature has no sign;
* inaccurate images of replayed actions (a Krylov buffer recycled from earlier
  operators): the recursive image ``A C = A s − AV (Vᵀ A s)`` inherits their error.

Both are breakdowns now (before: ``NotPositiveDefiniteError`` on a positive
semi-definite ``A``, curvature −3.7e13 at an action of norm 1e13; on replayed images
off by 1e-3, −1e-7 relative). A clearly negative value is confirmed with one fresh
product before ``A`` is declared not positive definite.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.policies import Policy
from pnsolve.problems import make_problem
from pnsolve.problems.zoo import rank_deficient_plus_jitter
from pnsolve.stopping import MaxIterations
from pnsolve.testing import eps

F64 = torch.float64
N, RANK, BLOCK = 50, 40, 5
#: ``B + jitter·I`` with ``B`` of rank 40: singular in float64
SINGULAR_JITTER = eps(F64) ** 2
#: relative error of the replayed images (recycled from another operator)
IMAGE_ERROR = 1e-3
#: the action's part outside the replayed span, relative: its true curvature is far
#: below what the images' error does to the recursive one
OUTSIDE = 1e-7
CONDITION = 100.0


class FixedAction(Policy):
    """The same action every iteration."""

    def __init__(self, s: torch.Tensor) -> None:
        self.s = s

    def __call__(self, state, generator):
        return self.s, None


class Replay:
    """A buffer of actions with given images (``images ≈ A actions``)."""

    def __init__(self, S: torch.Tensor, Z: torch.Tensor) -> None:
        self.actions, self.images = S, Z


@pytest.mark.parametrize("seed", [2, 3])
def test_cg_actions_on_a_singular_psd_matrix_break_down(seed):
    p = rank_deficient_plus_jitter(
        N, rank=RANK, jitter=SINGULAR_JITTER, generator=torch.Generator().manual_seed(seed),
        rhs="gaussian",
    )  # fmt: skip
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(N + 10))
    belief, info = solver.solve(p.A, p.b)
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    assert bool(torch.isfinite(belief.mean).all())


def _replayed(seed: int, flip: bool = False):
    """An SPD (or, ``flip``, indefinite) system, a replay with inaccurate images, an action
    almost in the replayed span."""
    g = torch.Generator().manual_seed(seed)
    p = make_problem("exponential", 30, generator=g, cond=CONDITION)
    A = p.A.to_dense()
    if flip:
        lam, Q = torch.linalg.eigh(A)
        A = (Q * torch.where(lam == lam.max(), -lam, lam)) @ Q.mT
        A = 0.5 * (A + A.mT)
    S = torch.randn(30, BLOCK, generator=g, dtype=F64)
    Z = A @ S
    Z = Z + IMAGE_ERROR * torch.randn(30, BLOCK, generator=g, dtype=F64) * Z.norm(dim=0)
    s = S @ torch.randn(BLOCK, generator=g, dtype=F64) + OUTSIDE * torch.randn(
        30, generator=g, dtype=F64
    )
    return A, p.b, Replay(S, Z), s


@pytest.mark.parametrize("seed", [2, 3])
def test_negative_curvature_from_inaccurate_replayed_images_is_a_breakdown(seed):
    A, b, replay, s = _replayed(seed)
    solver = pn.ProbabilisticLinearSolver(FixedAction(s), MaxIterations(1))
    belief, info = solver.solve(A, b, buffer=replay)
    assert info.stop_reason is pn.StopReason.BREAKDOWN
    assert belief.rank == BLOCK  # the replayed directions stay, the action adds none
    assert info.products == 2  # the action's product and the one that checked it


def test_negative_curvature_confirmed_by_a_fresh_product_still_raises():
    A, b, _, _ = _replayed(2, flip=True)
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(30))
    with pytest.raises(pn.NotPositiveDefiniteError, match=r"negative curvature.*confirmed"):
        solver.solve(A, b)


def test_rounding_noise_never_takes_a_belief_past_rank_n():
    """Products with rounding-level noise (as a GPU's differ from the CPU's) can hide the
    breakdown on a singular matrix; the belief still stops at rank n. (Seed 3 with noise
    of eps·max|A s| per entry ran 60 CG actions for n = 50 before the cap; an H200 did
    the same on seed 2 without noise.)"""
    p = rank_deficient_plus_jitter(
        N, rank=RANK, jitter=SINGULAR_JITTER, generator=torch.Generator().manual_seed(3),
        rhs="gaussian",
    )  # fmt: skip
    A, g = p.A.to_dense(), torch.Generator().manual_seed(99)

    def noisy(V: torch.Tensor) -> torch.Tensor:
        out = A @ V
        return out + eps(F64) * out.abs().max() * torch.randn(out.shape, generator=g, dtype=F64)

    op = pn.linops.Closure(noisy, (N, N), dtype=F64, device=A.device, is_symmetric=True)
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), MaxIterations(N + 10))
    belief, info = solver.solve(op, p.b)
    assert info.rank <= N and info.stop_reason is pn.StopReason.BREAKDOWN
    assert bool(torch.isfinite(belief.mean).all())
