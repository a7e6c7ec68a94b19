"""Random Fourier features of sums and products of kernels (Bochner, part by part).

A **sum** ``Σ_p k_p`` has the features of its parts side by side: the ``m`` features are
split into ``m_p`` per part (:func:`split`), each part's features scaled for its own
count. Each base row stores its part's index in column 0, so any subset of rows knows
its part. A **product** ``Π_p k_p`` of stationary parts has the spectral density of the
convolution: each feature's frequency is the sum of one frequency drawn from every part
(independently) and its amplitude the product of theirs. Each base row holds every
part's draws side by side.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .kernel import Kernel

__all__ = [
    "product_base",
    "product_projection",
    "split",
    "sum_base",
    "sum_projection",
]


def split(num_features: int, parts: int) -> list[int]:
    """``m`` features over ``P`` parts: ``⌊m/P⌋`` each, the first ``m mod P`` one more.

    Raises
    ------
    ValueError
        If ``m < P`` (every part needs a feature).
    """
    if num_features < parts:
        raise ValueError(
            f"num_features={num_features} is fewer than the sum's {parts} terms: each term "
            "needs random features of its own"
        )
    q, r = divmod(num_features, parts)
    return [q + (1 if p < r else 0) for p in range(parts)]


def sum_base(
    parts: Sequence[Kernel],
    num_features: int,
    input_dim: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """Base rows of a sum: ``[part index, part's draws, zero padding]``, part by part."""
    width = 1 + max(k.spectral_width(input_dim) for k in parts)
    blocks = []
    for p, (k, count) in enumerate(zip(parts, split(num_features, len(parts)))):
        draws = k.spectral_base(count, input_dim, generator=generator, dtype=dtype, device=device)
        block = torch.zeros(count, width, dtype=dtype, device=device)
        block[:, 0] = p
        block[:, 1 : 1 + draws.shape[1]] = draws
        blocks.append(block)
    return torch.cat(blocks, dim=0)


def sum_projection(
    parts: Sequence[Kernel],
    X: torch.Tensor,
    base: torch.Tensor,
    phases: torch.Tensor,
    num_features: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's part projects it; amplitudes scaled by ``m / m_p`` (the part's count)."""
    counts = split(num_features, len(parts))
    which = base[:, 0].round().long()
    projs, amps, order = [], [], []
    for p, k in enumerate(parts):
        rows = torch.nonzero(which == p).squeeze(1)
        if rows.numel() == 0:
            continue
        width = k.spectral_width(X.shape[1])
        proj, amp = k.spectral_projection(X, base[rows, 1 : 1 + width], phases[rows], counts[p])
        projs.append(proj)
        amps.append((amp * (num_features / counts[p])).expand(rows.numel()))
        order.append(rows)
    perm = torch.cat(order)
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.numel(), device=perm.device)
    return torch.cat(projs, dim=1)[:, inverse], torch.cat(amps)[inverse]


def product_base(
    parts: Sequence[Kernel],
    num_features: int,
    input_dim: int,
    *,
    generator: torch.Generator,
    dtype: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """Base rows of a product: every part's draws for every feature, side by side."""
    draws = [
        k.spectral_base(num_features, input_dim, generator=generator, dtype=dtype, device=device)
        for k in parts
    ]
    return torch.cat(draws, dim=1)


def product_projection(
    parts: Sequence[Kernel],
    X: torch.Tensor,
    base: torch.Tensor,
    phases: torch.Tensor,
    num_features: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Frequencies add (the first part carries the phases) and amplitudes multiply."""
    zero = torch.zeros_like(phases)
    proj: torch.Tensor | None = None
    amp: torch.Tensor | None = None
    col = 0
    for j, k in enumerate(parts):
        width = k.spectral_width(X.shape[1])
        pj, aj = k.spectral_projection(
            X, base[:, col : col + width], phases if j == 0 else zero, num_features
        )
        col += width
        proj = pj if proj is None else proj + pj
        amp = aj if amp is None else amp * aj
    assert proj is not None and amp is not None
    return proj, amp
