"""Squared distances and a square root with a safe gradient at zero (private helpers)."""

from __future__ import annotations

import torch

__all__ = ["safe_sqrt", "scaled_sqdist"]


def scaled_sqdist(
    Z1: torch.Tensor, Z2: torch.Tensor, self_index: torch.Tensor | None = None
) -> torch.Tensor:
    """Squared Euclidean distances ``‖z1_i − z2_j‖²`` of already-scaled inputs.

    Uses ``‖a‖² + ‖b‖² − 2 a·b`` (one GEMM), clamped at zero. Its gradient at
    ``a = b`` is exactly zero (``2a − 2b``), so coincident points never produce
    spurious gradients.

    Parameters
    ----------
    Z1
        Shape ``(n1, d)``.
    Z2
        Shape ``(n2, d)``.
    self_index
        Optional ``(n1,)`` integer tensor: row ``i`` is the same point as column
        ``self_index[i]`` of ``Z2`` (``-1``/out of range: none). Those entries are set to
        exact zeros (used when ``X2`` is ``X1``).

    Returns
    -------
    torch.Tensor
        Shape ``(n1, n2)``, non-negative.
    """
    n1 = (Z1 * Z1).sum(-1, keepdim=True)
    n2 = (Z2 * Z2).sum(-1, keepdim=True)
    r2 = torch.addmm(n1 + n2.mT, Z1, Z2.mT, alpha=-2.0).clamp_min(0.0)
    if self_index is not None:
        cols = torch.arange(Z2.shape[0], device=Z2.device)
        mask = self_index.unsqueeze(-1) == cols.unsqueeze(0)
        r2 = torch.where(mask, torch.zeros((), dtype=r2.dtype, device=r2.device), r2)
    return r2


def safe_sqrt(r2: torch.Tensor) -> torch.Tensor:
    """``sqrt(r2)`` for ``r2 ≥ 0`` whose gradient is zero (not NaN/Inf) where ``r2 = 0``."""
    pos = r2 > 0
    one = torch.ones((), dtype=r2.dtype, device=r2.device)
    return torch.where(pos, torch.sqrt(torch.where(pos, r2, one)), torch.zeros_like(r2))
