"""One blocked pass over a stored matrix: NaN/Inf and numerical symmetry together."""

from __future__ import annotations

import torch

__all__ = ["SYMMETRY_ROWS", "check_finite_symmetric"]

#: Tile side of :func:`check_finite_symmetric` (the temporary is one tile).
SYMMETRY_ROWS = 256


@torch.no_grad()
def check_finite_symmetric(matrix: torch.Tensor, name: str) -> bool:
    """Raise if ``matrix`` holds NaN/Inf; return whether it is symmetric to rounding.

    Symmetric means ``max |A − Aᵀ| ≤ 100 eps · max |A|`` (square matrices only). Two
    reads of the matrix: one ``aminmax`` gives ``max |A|`` (non-finite if any entry is
    NaN or Inf, so finiteness costs no extra pass), then the tile pairs ``(I, J)`` with
    ``J ≥ I`` give ``max |A[I, J] − A[J, I]ᵀ|`` (the mirror tile is transposed while in
    cache). Memory: one tile; one host synchronisation at the end. Measured at 4–5
    matrix–vector products for n = 5 000 on a 2-core CPU (one thread), against about a
    hundred for the separate finiteness, ``abs`` and ``A − Aᵀ`` passes it replaces.

    Raises
    ------
    ValueError
        ``"{name} contains NaN values"`` or ``"... Inf values"``.
    """
    n, m = matrix.shape
    if matrix.numel() == 0:
        return n == m
    inf = float("inf")
    worst = torch.zeros((), dtype=matrix.dtype, device=matrix.device)
    scale = _max_abs(matrix)  # NaN/Inf anywhere make it non-finite
    if n == m:  # tile pairs (I, J), J > I: the mirror tile is transposed while in cache
        t = min(SYMMETRY_ROWS, n)
        buf = torch.empty(t * t, dtype=matrix.dtype, device=matrix.device)
        for r0 in range(0, n, t):
            rows = slice(r0, min(n, r0 + t))
            for c0 in range(r0 + t, n, t):
                cols = slice(c0, min(n, c0 + t))
                upper = matrix[rows, cols]
                diff = buf[: upper.numel()].view(upper.shape)
                torch.sub(upper, matrix[cols, rows].mT, out=diff)
                worst = torch.maximum(worst, _max_abs(diff))
            block = matrix[rows, rows]  # the diagonal tile
            worst = torch.maximum(worst, _max_abs(block - block.mT))
    values = torch.stack([scale, worst]).tolist()  # the one host round trip
    if not all(v == v and v != inf for v in values):
        bad = "NaN" if bool(torch.isnan(matrix).any()) else "Inf"
        raise ValueError(f"{name} contains {bad} values")
    if n != m:
        return False
    tol = 100 * torch.finfo(matrix.dtype).eps * max(values[0], torch.finfo(matrix.dtype).tiny)
    return values[1] <= tol


def _max_abs(x: torch.Tensor) -> torch.Tensor:
    """``max |x|`` (NaN if ``x`` holds one) from one ``aminmax`` pass, 0-d.

    ``torch.aminmax`` reads ``x`` once without a temporary; on a 2-core CPU it ran at
    about one matrix–vector product per pass, where ``vector_norm(x, inf)`` took 7 and
    ``x.abs().max()`` 11.
    """
    if x.numel() == 0:
        return torch.zeros((), dtype=x.dtype, device=x.device)
    lo, hi = torch.aminmax(x)
    return torch.maximum(-lo, hi)
