"""Reorthogonalisation of a vector against an orthonormal basis."""

from __future__ import annotations

import torch

__all__ = ["reorthogonalize"]


def reorthogonalize(w: torch.Tensor, Qt: torch.Tensor, passes: int = 2) -> torch.Tensor:
    """Remove from ``w`` its components along the rows of ``Qt``.

    Classical Gram–Schmidt repeated ``passes`` times ("twice is enough",
    Giraud–Langou–Rozložník): two passes leave ``w`` orthogonal to the basis to
    working precision.

    Parameters
    ----------
    w
        Vector, shape ``(n,)``; modified in place and returned.
    Qt
        Orthonormal basis stored as rows, shape ``(m, n)``.
    passes
        Number of Gram–Schmidt passes, ``≥ 1``.

    Returns
    -------
    torch.Tensor
        ``w`` with ``Qt w ≈ 0``, shape ``(n,)``.
    """
    if passes < 1:
        raise ValueError(f"passes must be at least 1, got {passes}")
    for _ in range(passes):
        w.sub_(Qt.mT @ (Qt @ w))
    return w
