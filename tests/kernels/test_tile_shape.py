"""The chunked backend's tile: cache-sized on a CPU, large on a CUDA device, within memory."""

from __future__ import annotations

import pytest
import torch

from pnsolve.kernels.backends.tiling import (
    DEFAULT_MAX_MEMORY,
    DEFAULT_TILE,
    DEFAULT_TILE_CUDA,
    tile_shape,
)

pytestmark = pytest.mark.cpu_only(reason="pure arithmetic on shapes; no tensors")


@pytest.mark.parametrize(
    ("device", "expected"),
    [(None, DEFAULT_TILE), (torch.device("cpu"), DEFAULT_TILE),
     (torch.device("cuda"), DEFAULT_TILE_CUDA), ("cuda:1", DEFAULT_TILE_CUDA)],
)  # fmt: skip
def test_the_default_tile_depends_on_the_device(device, expected) -> None:
    assert tile_shape(10**6, 10**6, 4, device=device) == expected


def test_the_tile_is_clipped_to_the_matrix_and_kept_within_memory() -> None:
    assert tile_shape(300, 2000, 8, device="cuda") == (300, 2000)
    tr, tc = tile_shape(10**6, 10**6, 8, num_buffers=4, device="cuda")
    assert 4 * tr * tc * 8 <= DEFAULT_MAX_MEMORY and tr * tc >= DEFAULT_MAX_MEMORY // 64
    assert tile_shape(10**6, 10**6, 8, tile=(64, 32), device="cuda") == (64, 32)  # asked for
