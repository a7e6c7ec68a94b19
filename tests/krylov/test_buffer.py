"""Krylov buffers: virtual solver run (deflation, no K products), recording, compression."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import pnsolve as pn
from pnsolve.krylov import KrylovBuffer
from pnsolve.testing import CountingOperator, exact_tol, krylov_tol

F64 = torch.float64


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _system(n=60, seed=0, noise_scale=0.1):
    """Kernel Gram K (no noise) and a diagonal D (per-point noise), dense."""
    g = _gen(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64)
    K = pn.kernels.RBF(lengthscale=0.3)(X).detach()
    d = noise_scale * (0.5 + torch.rand(n, generator=g, dtype=F64))
    return K, d


def _ops(K, d):
    Kop = pn.linops.as_linop(K)
    return Kop, Kop + pn.linops.Diagonal(d)


def _cg_solver(k):
    return pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(k))


def test_solver_records_actions_and_fixed_part_images():
    K, d = _system()
    Kop, A = _ops(K, d)
    buf = KrylovBuffer(Kop)
    b = torch.randn(60, generator=_gen(1), dtype=F64)
    _, info = _cg_solver(7).solve(A, b, buffer=buf)
    assert buf.size == 7 == info.iterations
    torch.testing.assert_close(buf.images, K @ buf.actions, rtol=0, atol=exact_tol(F64, 60) * 10)
    assert buf.nbytes == 2 * 60 * 7 * 8


def test_virtual_run_is_the_block_conditioning_and_needs_no_product_with_K():
    K, d = _system()
    Kop, _ = _ops(K, d)
    counting = CountingOperator(Kop)
    buf = KrylovBuffer(counting)
    S = torch.randn(60, 9, generator=_gen(2), dtype=F64)
    buf.append(S, K @ S)
    d2 = 2.0 * d  # a new system K + D_2
    A2 = counting + pn.linops.Diagonal(d2)
    b = torch.randn(60, generator=_gen(3), dtype=F64)
    counting.reset()
    belief = pn.solvers.virtual_run(buf, A2, b)
    assert counting.products == 0
    A2d = K + torch.diag(d2)
    C = S @ torch.linalg.solve(S.mT @ A2d @ S, S.mT)
    cond = float(torch.linalg.cond(S.mT @ A2d @ S))
    tol = krylov_tol(F64, cond) * float(C.abs().max())
    torch.testing.assert_close(belief.inverse_approx.to_dense(), C, rtol=0, atol=tol)
    torch.testing.assert_close(belief.mean, C @ b, rtol=0, atol=tol * float(b.norm()))
    # deflation: the initial residual is orthogonal to span(S)
    r = b - A2d @ belief.mean
    assert float((S.mT @ r).abs().max()) <= tol * float(S.norm()) * float(b.norm()) * 10


def test_solve_with_buffer_starts_from_the_virtual_run():
    K, d = _system()
    Kop, A = _ops(K, d)
    buf = KrylovBuffer(Kop)
    b = torch.randn(60, generator=_gen(4), dtype=F64)
    _cg_solver(6).solve(A, b, buffer=buf)
    A2 = Kop + pn.linops.Diagonal(0.5 * d)
    b2 = b + 0.1 * torch.randn(60, generator=_gen(5), dtype=F64)
    ref = pn.solvers.virtual_run(buf, A2, b2)
    state0 = next(iter(_cg_solver(3).iterate(A2, b2, buffer=buf)))
    assert state0.iteration == 0 and state0.products == 0
    torch.testing.assert_close(state0.belief.mean, ref.mean)
    assert buf.size == 6  # iterate() only recorded nothing yet


def test_recycling_needs_fewer_products_with_K():
    # A sequence of systems K + D_t with slowly changing D_t (as in Newton steps):
    # with the buffer each solve starts deflated and needs fewer new products.
    K, d = _system(n=150, seed=6, noise_scale=0.02)
    Kop = pn.linops.as_linop(K)
    stop = pn.stopping.ResidualNorm(rtol=1e-8) | pn.stopping.MaxIterations(150)
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), stop)
    b = torch.randn(150, generator=_gen(7), dtype=F64)
    totals = {}
    for recycle in (False, True):
        counting = CountingOperator(Kop)
        buf = KrylovBuffer(counting)
        for t in range(4):
            A = counting + pn.linops.Diagonal(d * (1.0 + 0.2 * t))
            _, info = solver.solve(A, b, buffer=buf if recycle else None)
            assert info.residual_norms[-1] <= 1e-8 * float(b.norm()) * 1.0001
        totals[recycle] = counting.products
    assert totals[True] < totals[False] / 2, totals


@given(st.integers(2, 8), st.integers(0, 1000))
def test_compress_keeps_the_best_variance_reduction(rank, seed):
    K, d = _system(n=40, seed=seed % 7)
    Kop, A = _ops(K, d)
    buf = KrylovBuffer(Kop)
    S = torch.randn(40, 12, generator=_gen(seed), dtype=F64)
    buf.append(S, K @ S)
    Ad = K + torch.diag(d)

    def reduction(S_):  # tr(K C K) with C = S (SᵀAS)⁻¹ Sᵀ
        C = S_ @ torch.linalg.solve(S_.mT @ Ad @ S_, S_.mT)
        return float(torch.trace(K @ C @ K))

    full = reduction(S)
    buf.compress(rank, A)
    assert buf.size == rank
    Sc = buf.actions
    torch.testing.assert_close(buf.images, K @ Sc, rtol=0, atol=exact_tol(F64, 40) * 1e3)
    # A-orthonormal kept actions
    torch.testing.assert_close(Sc.mT @ Ad @ Sc, torch.eye(rank, dtype=F64), rtol=0, atol=1e-8)
    kept = reduction(Sc)
    assert kept <= full * (1 + 1e-10)
    # no rank-`rank` subset of the original actions does better
    for j in range(0, 12 - rank + 1, 3):
        assert reduction(S[:, j : j + rank]) <= kept * (1 + 1e-8)


def test_compress_to_full_rank_keeps_the_belief_and_drops_dependent_actions():
    K, d = _system(n=50)
    Kop, A = _ops(K, d)
    buf = KrylovBuffer(Kop)
    S = torch.randn(50, 6, generator=_gen(8), dtype=F64)
    S = torch.cat([S, S[:, :2] @ torch.tensor([[1.0], [2.0]], dtype=F64)], dim=1)  # dependent
    buf.append(S, K @ S)
    b = torch.randn(50, generator=_gen(9), dtype=F64)
    before = pn.solvers.virtual_run(buf, A, b).inverse_approx.to_dense()
    buf.compress(100, A)
    assert buf.size == 6  # the dependent direction is gone
    after = pn.solvers.virtual_run(buf, A, b).inverse_approx.to_dense()
    torch.testing.assert_close(after, before, rtol=0, atol=1e-9 * float(before.abs().max()))


def test_recycled_policy_reproduces_the_virtual_run():
    K, d = _system(n=40)
    Kop, A = _ops(K, d)
    buf = KrylovBuffer(Kop)
    S = torch.randn(40, 5, generator=_gen(10), dtype=F64)
    buf.append(S, K @ S)
    b = torch.randn(40, generator=_gen(11), dtype=F64)
    ref = pn.solvers.virtual_run(buf, A, b)
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.Recycled(buf, block_size=2), pn.stopping.MaxIterations(3)
    )
    belief, info = solver.solve(A, b)
    assert info.products == 3
    torch.testing.assert_close(belief.mean, ref.mean, rtol=0, atol=1e-10)
    with pytest.raises(RuntimeError, match="used"):
        pn.ProbabilisticLinearSolver(pn.policies.Recycled(buf), pn.stopping.MaxIterations(6)).solve(
            A, b
        )


def test_mismatched_operators_and_columns_are_refused():
    K, d = _system(n=20)
    Kop, _ = _ops(K, d)
    buf = KrylovBuffer(Kop)
    other = pn.linops.as_linop(K.clone()) + pn.linops.Diagonal(d)
    with pytest.raises(ValueError, match="Sum with K"):
        buf.images_for(other)
    with pytest.raises(ValueError, match="shape"):
        buf.images_for(torch.eye(21, dtype=F64))
    with pytest.raises(TypeError, match="dtype"):
        buf.images_for(torch.eye(20, dtype=torch.float32))
    with pytest.raises(ValueError, match="S must have shape"):
        buf.append(torch.ones(19, 2, dtype=F64), torch.ones(19, 2, dtype=F64))
    with pytest.raises(TypeError, match="dtype"):
        buf.append(torch.ones(20, 2), torch.ones(20, 2))
    with pytest.raises(ValueError, match="same shape"):
        buf.append(torch.ones(20, 2, dtype=F64), torch.ones(20, 3, dtype=F64))
    with pytest.raises(ValueError, match="S"):
        buf.append(torch.full((20, 1), float("nan"), dtype=F64), torch.ones(20, 1, dtype=F64))
    with pytest.raises(ValueError, match="rank"):
        buf.compress(-1)
    with pytest.raises(ValueError, match="Sum with K"):
        pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(2)).solve(
            other, torch.ones(20, dtype=F64), buffer=buf
        )


@pytest.mark.parametrize("offset", [1e-4, 1e-6])
def test_compress_drops_nearly_dependent_actions_whose_images_lose_accuracy(offset):
    """Actions that repeat others up to a small ``offset`` have a Gram matrix with
    relative eigenvalues ~offset²; in the A-orthonormal basis their image errors are
    amplified by its inverse square root. Kept, they broke the conjugacy of the
    compressed actions (‖SᵀAS − I‖ = 1.4e-4 at offset 1e-6, rounding level is 1e-15)."""
    g = torch.Generator().manual_seed(3)
    n = 200
    X = torch.randn(n, 2, generator=g, dtype=torch.float64)
    A = pn.kernels.RBF(lengthscale=1.0)(X).detach() + 1e-2 * torch.eye(n, dtype=torch.float64)
    S = torch.randn(n, 6, generator=g, dtype=torch.float64)
    S = torch.cat([S, S[:, :3] + offset * torch.randn(n, 3, generator=g, dtype=torch.float64)], 1)
    buf = KrylovBuffer(A)
    buf.append(S, A @ S)
    buf.compress(S.shape[1])
    V = buf.actions
    G = V.mT @ A @ V
    gap = float((G - torch.eye(G.shape[0], dtype=G.dtype)).abs().max())
    assert gap <= krylov_tol(torch.float64), gap
