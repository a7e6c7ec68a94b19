"""KernelSystem: every access agrees with the dense K̂ and is charged exactly."""

from __future__ import annotations

import pytest
import torch
from iterative_support import KERNELS, build_problem

import pnsolve as pn
from pnsolve.iterative import KernelSystem
from pnsolve.testing import exact_tol, rtol_for
from pnsolve.testing.contract import LinearOperatorContract

F64, F32 = torch.float64, torch.float32
N, D, K = 90, 3, 3
IDX = torch.tensor([0, 5, 17, 44, 89])
BACKENDS = ("dense", "chunked")


def _relerr(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float(torch.linalg.matrix_norm(a - b) / torch.linalg.matrix_norm(b))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [F64, F32])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_accesses_agree_with_dense_matrix(backend, dtype, kernel):
    p = build_problem(N, D, K, kernel=kernel, dtype=dtype, backend=backend)
    s = p.system
    ref = (s.kernel(s.X.double()) + s.noise * torch.eye(N, dtype=F64)).detach()
    V = p.B
    # Against the kernel's own differentiable formula (float64 inputs): rounding-level
    # in float64; in float32, Matérn-1/2 near-duplicates amplify to about √eps.
    tol = rtol_for(dtype)
    assert _relerr(s.matmul(V), ref @ V.double()) <= tol
    assert _relerr(s.rows(IDX, V), ref[IDX] @ V.double()) <= tol
    assert _relerr(s.columns(IDX, V[: len(IDX)]), ref[:, IDX] @ V[: len(IDX)].double()) <= tol
    assert _relerr(s.row_block(IDX), ref[IDX]) <= tol
    assert _relerr(s.block(IDX), ref[IDX][:, IDX]) <= tol
    assert _relerr(s.diagonal()[None], ref.diagonal()[None]) <= exact_tol(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [F64, F32])
def test_accesses_describe_one_matrix(backend, dtype):
    # Matérn-1/2 is the sensitive case: self-similarities must be exact everywhere.
    p = build_problem(N, D, K, kernel="matern12", dtype=dtype, backend=backend)
    s, V = p.system, p.B
    full = s.row_block(torch.arange(N))
    tol = exact_tol(dtype, N)
    assert _relerr(s.matmul(V), full @ V) <= tol
    assert _relerr(s.rows(IDX, V), full[IDX] @ V) <= tol
    assert _relerr(s.columns(IDX, V[: len(IDX)]), full[:, IDX] @ V[: len(IDX)]) <= tol
    assert _relerr(s.block(IDX), full[IDX][:, IDX]) <= tol
    assert torch.equal(s.block(IDX), s.block(IDX).mT)
    assert torch.equal(full.diagonal(), s.diagonal())


@pytest.mark.parametrize("backend", BACKENDS)
def test_entries_are_charged_exactly(backend):
    s = build_problem(N, D, K, backend=backend).system
    V = torch.zeros(N, K, dtype=F64)
    b = IDX.numel()
    steps = [
        (lambda: s.matmul(V), N * N),
        (lambda: s.rows(IDX, V), b * N),
        (lambda: s.columns(IDX, V[:b]), b * N),
        (lambda: s.row_block(IDX), b * N),
        (lambda: s.block(IDX), b * b),
        (lambda: s.diagonal(), N),
    ]
    total = 0
    for call, cost in steps:
        call()
        total += cost
        assert s.entries == total
    assert s.epochs == total / (N * N)


def test_chunked_products_evaluate_n_squared_entries(monkeypatch):
    # Independent of the system's counter: count the kernel values the tiles compute.
    s = build_problem(N, D, K, backend="chunked").system
    evaluated = []
    profile_ = s.kernel.profile_
    monkeypatch.setattr(
        s.kernel, "profile_", lambda t, w: evaluated.append(t.numel()) or profile_(t, w)
    )
    s.matmul(torch.ones(N, K, dtype=F64))
    assert sum(evaluated) == s.entries == N * N


def test_outputs_detached_and_follow_inputs():
    kernel = pn.kernels.RBF(lengthscale=0.5)
    X = torch.rand(N, D, dtype=F32, generator=torch.Generator().manual_seed(0))
    noise = torch.tensor(0.2, requires_grad=True)
    s = KernelSystem(kernel, X.requires_grad_(), noise)
    out = s.matmul(torch.ones(N, 1, dtype=F32))
    assert out.dtype == F32 and out.device == X.device and not out.requires_grad
    assert (s.n, s.dtype, s.device, s.noise) == (N, F32, X.device, float(noise.detach()))


def test_system_is_frozen_at_construction():
    kernel = pn.kernels.RBF(lengthscale=0.5)
    p = build_problem(N, D, K)
    s = KernelSystem(kernel, p.system.X, 0.1)
    before = s.matmul(p.B)
    kernel.lengthscale = 2.0
    assert torch.equal(s.matmul(p.B), before)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "name"),
    [
        (("rbf", torch.zeros(3, 2), 0.1), {}, TypeError, "kernel"),
        ((None, torch.zeros(3), 0.1), {}, ValueError, "X1|X"),
        ((None, torch.full((3, 2), float("nan")), 0.1), {}, ValueError, "X"),
        ((None, torch.zeros(3, 2), 0.0), {}, ValueError, "noise"),
        ((None, torch.zeros(3, 2), torch.ones(2)), {}, TypeError, "noise"),
        ((None, torch.zeros(3, 2), "x"), {}, TypeError, "noise"),
        ((None, torch.zeros(3, 2), 0.1), {"backend": "gpu"}, ValueError, "backend"),
    ],
)
def test_bad_construction_names_the_argument(args, kwargs, error, name):
    kernel = pn.kernels.RBF() if args[0] is None else args[0]
    with pytest.raises(error, match=name):
        KernelSystem(kernel, *args[1:], **kwargs)


def test_bad_access_names_the_argument():
    s = build_problem(N, D, K).system
    V = torch.zeros(N, K, dtype=F64)
    with pytest.raises(ValueError, match="V"):
        s.matmul(V[:-1])
    with pytest.raises(TypeError, match="V"):
        s.matmul(V.float())
    with pytest.raises(ValueError, match="idx"):
        s.rows(IDX.double(), V)
    with pytest.raises(IndexError, match="idx"):
        s.block(torch.tensor([N]))
    with pytest.raises(ValueError, match="W"):
        s.columns(IDX, V)


# ------------------------------------------------------------ the LinearOperator interface
class _SystemContract(LinearOperatorContract):
    """``KernelSystem`` keeps every promise of a :class:`~pnsolve.linops.LinearOperator`."""

    backend = "dense"

    def make(self, dtype):
        s = build_problem(24, D, K, kernel="matern32-ard", dtype=dtype, backend=self.backend).system
        twin = KernelSystem(s.kernel, s.X, s.noise, backend=self.backend)
        return s, twin.row_block(torch.arange(s.n))


class TestDenseSystemContract(_SystemContract):
    backend = "dense"


class TestChunkedSystemContract(_SystemContract):
    backend = "chunked"


@pytest.mark.parametrize("backend", BACKENDS)
def test_operator_accesses_are_charged_like_the_system_ones(backend):
    s = build_problem(N, D, K, backend=backend).system
    assert isinstance(s, pn.linops.LinearOperator) and s.is_symmetric and s.is_psd
    assert s.shape == (N, N) and s.as_linop() is s
    V = torch.ones(N, K, dtype=F64)
    b = IDX.numel()
    steps = [
        (lambda: s @ V, N * N, 1),
        (lambda: s @ V[:, 0], N * N, 1),
        (lambda: s.matmat(V), N * N, 1),
        (lambda: s.matvec(V[:, 0]), N * N, 1),
        (lambda: s.rmatmat(V), N * N, 1),
        (lambda: s.row_block(IDX.tolist()), b * N, 0),
        (lambda: s.row_block(slice(0, 10)), 10 * N, 0),
        (lambda: s.column_block(IDX), b * N, 0),
        (lambda: s.diagonal(), N, 0),
        (lambda: s.trace(), N, 0),
        (lambda: s.to_dense(), N * N, 1),
    ]
    total = products = 0
    for call, cost, product in steps:
        call()
        total, products = total + cost, products + product
        assert (s.entries, s.products) == (total, products)


def test_operator_accesses_agree_with_the_system_ones():
    s = build_problem(N, D, K).system
    V = build_problem(N, D, K).B
    assert torch.equal(s @ V, s.matmul(V))
    assert torch.equal(s.column_block(IDX), s.row_block(IDX).mT)
    assert _relerr(s.to_dense()[IDX], s.row_block(IDX)) <= exact_tol(F64, N)


def test_pn_cg_runs_on_a_kernel_system_and_is_charged():
    p = build_problem(N, D, 1, noise=0.5)
    x, info = pn.cg(p.system, p.B[:, 0], rtol=1e-10)
    assert info.success
    assert p.system.products == info.products and p.system.epochs == info.products
    assert float(p.relres(x[:, None])[0]) <= 1e-9
