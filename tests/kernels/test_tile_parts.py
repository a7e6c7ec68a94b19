"""Tile rows in parts on several threads (``tiled_matmat(..., parts=p)``).

Each part runs its tile operations one-threaded on its own thread with its own buffers;
every row still sums its tiles in the same order, so the product must not depend on the
number of parts (checked to ``exact_tol`` for every kernel of the contract cases, with
and without a row offset). The caller's thread count is restored; workers never split
again; where the tiles may not leave the thread (one torch thread) one part is used.
"""

from __future__ import annotations

import threading

import pytest
import torch

import pnsolve as pn
from pnsolve._core import row_halves
from pnsolve.kernels.backends import ChunkedBackend
from pnsolve.kernels.backends.tiling import tiled_matmat
from pnsolve.testing import exact_tol
from pnsolve.testing.kernels import KERNEL_CASES, make_kernel_case

F64, F32 = torch.float64, torch.float32


@pytest.fixture
def two_threads(torch_threads):
    with torch_threads(max(torch.get_num_threads(), 2)):
        yield


def _inputs(n: int, d: int, dtype=F64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64).to(dtype)
    V = torch.randn(n, 2, generator=g, dtype=F64).to(dtype)
    return X, V


@pytest.mark.parametrize("name", sorted(KERNEL_CASES))
def test_parts_do_not_change_the_product(name, two_threads):
    kernel, d = make_kernel_case(name)
    X, V = _inputs(53, d)
    with torch.no_grad():
        one = tiled_matmat(kernel, X, None, V, (8, 16), parts=1)
        tol = exact_tol(F64, 53) * float(one.abs().max())
        for parts in (2, 3):
            stats: dict[str, int] = {}
            many = tiled_matmat(kernel, X, None, V, (8, 16), parts=parts, stats=stats)
            assert stats["parts"] == min(parts, row_halves.max_parts())  # at most the CPUs
            assert stats["tiles"] == 7 * 4
            assert float((many - one).abs().max()) <= tol


@pytest.mark.parametrize("dtype", [F64, F32])
def test_parts_of_a_row_block_with_offset(dtype, two_threads):
    k = pn.kernels.Matern(nu=1.5, lengthscale=0.4)
    X, V = _inputs(61, 3, dtype)
    a, b = 9, 50
    with torch.no_grad():
        one = tiled_matmat(k, X[a:b], X, V, (4, 8), self_offset=a, parts=1)
        two = tiled_matmat(k, X[a:b], X, V, (4, 8), self_offset=a, parts=2)
        full = k(X)[a:b] @ V
    tol = exact_tol(dtype, 61) * float(full.abs().max())
    assert float((two - one).abs().max()) <= tol
    assert float((two - full).abs().max()) <= 10 * tol


def test_each_part_runs_one_threaded_and_no_thread_count_changes(two_threads):
    seen: list[int] = []

    def work(rows: slice) -> int:
        seen.append(torch.get_num_threads())
        return rows.stop - rows.start

    before = torch.get_num_threads()
    sizes = row_halves.in_row_parts(work, 100, 2, align=16)
    assert sizes == [48, 52]  # aligned to 16 rows, as equal as that allows
    assert seen == [1, 1]
    assert torch.get_num_threads() == before
    fresh: list[int] = []  # a new thread starts from torch's default, as before
    thread = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert fresh == [before]


def test_in_row_parts_slices_cover_every_row_once():
    slices: list[slice] = []
    row_halves.in_row_parts(lambda s: slices.append(s), 10, 2, align=4)
    assert sorted((s.start, s.stop) for s in slices) == [(0, 4), (4, 10)]
    slices.clear()
    row_halves.in_row_parts(lambda s: slices.append(s), 3, 2, align=4)  # one block
    assert [(s.start, s.stop) for s in slices] == [(0, 3)]
    with pytest.raises(ValueError, match="parts"):
        row_halves.in_row_parts(lambda s: None, 10, 0)


def test_one_thread_means_one_part(torch_threads):
    k = pn.kernels.RBF(lengthscale=0.5)
    X, V = _inputs(40, 2)
    stats: dict[str, int] = {}
    with torch_threads(1), torch.no_grad():
        tiled_matmat(k, X, None, V, (8, 8), stats=stats)
    assert stats["parts"] == 1


def test_forward_with_hyperparameter_gradients_still_splits(two_threads):
    # The parameters require grad (training): the forward runs without a graph in its
    # parts, and the gradients equal those through the dense matrix.
    k = pn.kernels.RBF(lengthscale=0.5)
    X, V = _inputs(70, 2)
    op = pn.kernels.KernelMatrix(k, X, backend="chunked", tile=(16, 16))
    out = op @ V
    blocks = -(-70 // 16)  # rows of tiles
    expected = min(torch.get_num_threads(), blocks, row_halves.max_parts())
    assert expected >= 2 and op._impl.stats["parts"] == expected
    (g_tiled,) = torch.autograd.grad(out.square().sum(), k.raw_lengthscale)
    (g_dense,) = torch.autograd.grad((k(X) @ V).square().sum(), k.raw_lengthscale)
    tol = exact_tol(F64, 70) * 1e2
    assert float((g_tiled - g_dense).abs()) <= tol * float(g_dense.abs())


def test_the_memory_cap_counts_every_parts_buffers(two_threads):
    k = pn.kernels.RBF(lengthscale=0.5)
    X, _ = _inputs(400, 2)
    cap = 64 * 64 * 8 * 2  # two tile buffers of 64 × 64 float64 entries
    backend = ChunkedBackend(k, X, None, max_memory=cap)
    tr, tc = backend.tile
    assert backend.parts == min(torch.get_num_threads(), row_halves.max_parts()) >= 2
    assert backend.parts * (1 + k.tile_buffers) * tr * tc * 8 <= cap


def test_a_term_without_parallel_tiles_keeps_the_product_on_one_thread(two_threads):
    # GPyTorch kernels enter GPyTorch's global settings contexts per tile, which are not
    # safe on several threads at once: any expression holding one runs in one part.
    gpytorch = pytest.importorskip("gpytorch")

    class Custom(gpytorch.kernels.RBFKernel):  # no native equivalent: a GPyTorchKernel
        pass

    wrapped = pn.kernels.from_gpytorch(Custom().double())
    assert isinstance(wrapped, pn.kernels.GPyTorchKernel) and not wrapped.parallel_tiles
    X, V = _inputs(40, 2)
    for kernel in (wrapped, wrapped + pn.kernels.RBF(lengthscale=0.5)):
        stats: dict[str, int] = {}
        with torch.no_grad():
            tiled_matmat(kernel, X, None, V, (8, 8), stats=stats)
        assert stats["parts"] == 1
    assert pn.kernels.RBF(lengthscale=0.5).parallel_tiles
