"""Segment sums over action blocks: the one-hot product (GPUs) equals ``index_add`` (CPU)."""

from __future__ import annotations

import pytest
import torch

from pnsolve.gp.cagp.actions import random_blocks
from pnsolve.gp.cagp.segments import by_matmul, segment_sum
from pnsolve.testing import exact_tol

F64 = torch.float64


@pytest.mark.parametrize(("shape", "dim"), [((37,), 0), ((37, 3), 0), ((4, 37), 1)])
def test_both_paths_agree_in_values_and_gradients(shape, dim) -> None:
    g = torch.Generator().manual_seed(0)
    src = torch.randn(*shape, generator=g, dtype=F64).requires_grad_(True)
    block_of = random_blocks(37, 5, g, src.device)
    a = segment_sum(src, block_of, 5, dim, matmul=False)
    b = segment_sum(src, block_of, 5, dim, matmul=True)
    assert a.shape == b.shape and a.shape[dim] == 5
    tol = exact_tol(F64, 37) * float(src.detach().abs().sum())
    assert float((a - b).abs().max()) <= tol
    w = torch.randn(a.shape, generator=g, dtype=F64)
    (ga,) = torch.autograd.grad((a * w).sum(), src)
    (gb,) = torch.autograd.grad((b * w).sum(), src)
    assert torch.equal(ga, gb)  # both are w[block_of]: a gather, exact


def test_the_one_hot_path_is_for_devices_other_than_the_cpu() -> None:
    assert not by_matmul(torch.device("cpu"))
    assert by_matmul(torch.device("cuda"))
