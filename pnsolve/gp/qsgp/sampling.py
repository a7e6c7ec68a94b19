"""The four index sets of one QSGP estimate, and the leaf copies their gradients reach."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._core import random as rnd

__all__ = ["Draw", "draw_indices"]


@dataclass
class Draw:
    """Indices of one estimate.

    All are drawn uniformly with replacement; a batch at least as large as its population
    takes every index once, so the estimate is exact there.

    Attributes
    ----------
    rows
        ``ℓ̃``: data points, shape ``(ñ,)``.
    u
        The distinct basis functions in ``ĩ ∪ j̃``, shape ``(|u|,)``.
    li, lj
        Positions of ``ĩ`` and ``j̃`` in ``u``, shape ``(m̃,)`` each.
    diag
        The distinct diagonal-only columns ``r̃`` (``≥ R``), shape ``(k,)``.
    diag_counts
        How often each was drawn, shape ``(k,)``.
    n_tilde, m_tilde, r_tilde
        The batch sizes the estimate divides by (``ñ``, ``m̃`` for ``ĩ``/``j̃``, ``m̃``
        for ``r̃``; the population sizes for full batches).
    """

    rows: torch.Tensor
    u: torch.Tensor
    li: torch.Tensor
    lj: torch.Tensor
    diag: torch.Tensor
    diag_counts: torch.Tensor
    n_tilde: int
    m_tilde: int
    r_tilde: int


def _sample(population: int, size: int, generator: torch.Generator, device) -> torch.Tensor:
    if size >= population:
        return torch.arange(population, device=device)
    return rnd.randint(0, population, size, generator=generator, device=device)


def draw_indices(
    n: int,
    m: int,
    R: int,
    batch_size: int,
    feature_batch_size: int,
    generator: torch.Generator,
    *,
    device: torch.device | str | None = None,
) -> Draw:
    """Draw ``ℓ̃``, ``ĩ``, ``j̃`` and ``r̃``.

    ``ℓ̃``: ``batch_size`` of ``n``; ``ĩ``, ``j̃``: ``feature_batch_size`` of ``m``,
    independent; ``r̃``: ``feature_batch_size`` of the ``m − R`` diagonal columns
    ``R, …, m − 1``.

    With ``feature_batch_size ≥ m`` both ``ĩ`` and ``j̃`` are ``0, …, m − 1`` (and
    ``r̃`` every diagonal column); with ``batch_size ≥ n``, ``ℓ̃`` is every point.

    The indices are drawn on ``generator``'s device and returned on ``device`` (the
    data's; default: the generator's), so a CPU generator draws the same sets for data
    on any device.
    """
    device = generator.device if device is None else torch.device(device)
    rows = _sample(n, batch_size, generator, device)
    i = _sample(m, feature_batch_size, generator, device)
    j = i if feature_batch_size >= m else _sample(m, feature_batch_size, generator, device)
    u, inverse = torch.unique(torch.cat([i, j]), return_inverse=True)
    li, lj = inverse[: i.numel()], inverse[i.numel() :]
    if R < m:
        r = _sample(m - R, feature_batch_size, generator, device) + R
        diag, counts = torch.unique(r, return_counts=True)
    else:
        diag = counts = torch.zeros(0, dtype=torch.long, device=device)
    return Draw(
        rows=rows,
        u=u,
        li=li,
        lj=lj,
        diag=diag,
        diag_counts=counts,
        n_tilde=rows.numel(),
        m_tilde=i.numel(),
        r_tilde=max(1, min(feature_batch_size, m - R)),
    )
