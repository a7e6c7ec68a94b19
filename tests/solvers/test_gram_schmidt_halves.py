"""Gram–Schmidt passes in two row halves, and no BLAS dot in the per-iteration work.

Large observed factors are read in two row halves on two threads
(:mod:`pnsolve._core.row_halves`); the results must equal the one-thread products to
rounding and leave the belief's conjugacy intact. ``pn.cg``, the PLS (CG, Lanczos and
random policies) and the Lanczos process must not call a BLAS dot product: MKL threads
it, and its OpenMP worker then spins for milliseconds on the core the next two-thread
product needs (measured: PLS iterations at ``n = 5 000`` took 14.3 ms with the dot and
10.1 without it).
"""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

import pnsolve as pn
from pnsolve._core import row_halves
from pnsolve.solvers import gram_schmidt as gs
from pnsolve.testing import conjugacy_tol, exact_tol, krylov_tol

F64 = torch.float64


@pytest.fixture
def two_threads(torch_threads):
    """At least two torch threads (the split needs them), restored afterwards."""
    with torch_threads(max(torch.get_num_threads(), 2)):
        yield


@pytest.fixture
def halves(monkeypatch):
    """Counts the work handed to two row halves."""
    calls = {"n": 0}
    original = row_halves.in_two_halves

    def counted(work, rows):
        calls["n"] += 1
        return original(work, rows)

    monkeypatch.setattr(gs, "in_two_halves", counted)
    return calls


def test_in_two_halves_covers_every_row_once():
    top, bottom = row_halves.in_two_halves(lambda rows: list(range(9))[rows], 9)
    assert top == [0, 1, 2, 3] and bottom == [4, 5, 6, 7, 8]


def test_may_split_refuses_autograd_and_one_thread(two_threads, torch_threads):
    x = torch.ones(3, dtype=F64)
    assert row_halves.may_split(x, x)
    assert not row_halves.may_split(x, x.clone().requires_grad_())
    with torch_threads(1):
        assert not row_halves.may_split(x)


@pytest.mark.parametrize("m", [1, 2])
def test_split_passes_equal_the_plain_products(m, two_threads, halves, monkeypatch):
    g = torch.Generator().manual_seed(m)
    n, i = 301, 40
    V, AV = torch.randn(n, i, generator=g, dtype=F64), torch.randn(n, i, generator=g, dtype=F64)
    Y, C = torch.randn(n, m, generator=g, dtype=F64), torch.randn(n, m, generator=g, dtype=F64)
    coef = torch.randn(i, m, generator=g, dtype=F64)
    plain_coef, plain_sub = V.mT @ Y, [C - V @ coef, Y - AV @ coef]
    monkeypatch.setattr(gs, "SPLIT_MIN_ELEMENTS", 1)
    split_coef = gs._coefficients(V, Y)
    split_sub = gs._subtract([(C, V), (Y, AV)], coef)
    assert halves["n"] == 2
    tol = exact_tol(F64, n)
    assert float((split_coef - plain_coef).abs().max()) <= tol * float(plain_coef.abs().max())
    for a, b in zip(split_sub, plain_sub, strict=True):
        assert a.shape == b.shape and float((a - b).abs().max()) <= tol * float(b.abs().max())


def test_split_below_the_size_or_with_autograd_is_not_taken(two_threads, halves):
    V = torch.ones(10, 3, dtype=F64)
    gs._coefficients(V, torch.ones(10, 1, dtype=F64))
    assert halves["n"] == 0  # 30 entries, far below SPLIT_MIN_ELEMENTS
    big = torch.ones(gs.SPLIT_MIN_ELEMENTS // 4 + 1, 4, dtype=F64)
    y = torch.ones(big.shape[0], 1, dtype=F64, requires_grad=True)
    gs._coefficients(big, y)
    assert halves["n"] == 0


@pytest.mark.parametrize("prior", ["inverse", "general"])
def test_pls_with_split_passes_keeps_its_belief_conjugate(prior, two_threads, halves, monkeypatch):
    monkeypatch.setattr(gs, "SPLIT_MIN_ELEMENTS", 1)
    g = torch.Generator().manual_seed(3)
    n = 200
    X = torch.rand(n, 3, generator=g, dtype=F64)
    K = pn.kernels.RBF(lengthscale=0.2)(X, X).detach() + 1e-3 * torch.eye(n, dtype=F64)
    b = torch.randn(n, generator=g, dtype=F64)
    kwargs = {} if prior == "inverse" else {"prior": 1.0}
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(80), **kwargs)
    belief, _ = solver.solve(K, b)
    assert halves["n"] > 0
    V = belief.V
    cond = float(torch.linalg.cond(K))
    if prior == "inverse":
        err = float((V.mT @ K @ V - torch.eye(V.shape[1], dtype=F64)).abs().max())
        assert err <= conjugacy_tol(F64, cond, n)
    monkeypatch.setattr(gs, "SPLIT_MIN_ELEMENTS", 10**18)
    reference, _ = solver.solve(K, b)
    diff = float((belief.mean - reference.mean).norm() / reference.mean.norm())
    assert diff <= krylov_tol(F64, cond)


class _NoVectorDot(TorchFunctionMode):
    """Records BLAS-level dot products of two vectors."""

    def __init__(self) -> None:
        super().__init__()
        self.dots: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        vectors = len(args) >= 2 and all(getattr(a, "ndim", 0) == 1 for a in args[:2])
        # linalg.vecdot of two 1-d tensors is a BLAS dot too (measured: 4-8 ms of spinning)
        products = ("matmul", "__matmul__", "linalg_vecdot", "vecdot")
        if name in ("dot", "vdot", "inner") or (name in products and vectors):
            self.dots.append(name)
        return func(*args, **(kwargs or {}))


def test_solvers_call_no_vector_dot():
    g = torch.Generator().manual_seed(0)
    n = 60
    B = torch.randn(n, n, generator=g, dtype=F64)
    A = B @ B.mT + n * torch.eye(n, dtype=F64)
    b = torch.randn(n, generator=g, dtype=F64)
    policies = [pn.policies.CG(), pn.policies.Lanczos(start="random"), pn.policies.Random()]
    big = torch.randn(1100, 1100, generator=g, dtype=F64)  # the symmetry probe's size
    with _NoVectorDot() as mode:
        pn.linops.as_linop(big + big.mT)  # the conversion's symmetry probe
        pn.cg(A, b)
        pn.cg(A, b, precision="mixed")
        for policy in policies:
            solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(20))
            solver.solve(A, b, generator=torch.Generator().manual_seed(1))
        pn.krylov.lanczos(A, b, 20)
    assert mode.dots == []
