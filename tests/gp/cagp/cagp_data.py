"""Small regression problems shared by the CaGP tests."""

from __future__ import annotations

import torch

F64 = torch.float64


def data(n: int = 60, d: int = 2, seed: int = 0, dtype: torch.dtype = F64):
    """Inputs ``(n, d)`` on ``[0, 1]^d`` and noisy targets of a smooth function."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=dtype)
    y = (
        torch.sin(4 * X[:, 0])
        + X[:, 1:].sum(1) ** 2
        + 0.1 * torch.randn(n, generator=g, dtype=dtype)
    )
    return X, y


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
