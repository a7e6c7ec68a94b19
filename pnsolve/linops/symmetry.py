"""NaN/Inf and numerical symmetry of a stored matrix: exact when small, a probe when large."""

from __future__ import annotations

import math

import torch

from .._core.validation import check_finite

__all__ = ["PROBE_MIN_ROWS", "PROBE_SAFETY", "SYMMETRY_ROWS", "check_finite_symmetric"]

#: Tile side of the exact check (the temporary is one tile).
SYMMETRY_ROWS = 256
#: Square matrices with at least this many rows are checked by the probe.
PROBE_MIN_ROWS = 1024
#: Safety factor of the probe's tolerance ``PROBE_SAFETY · eps · √n · F``; the largest
#: ratio ``|uᵀAv − vᵀAu| / (eps √n F)`` seen for symmetric matrices (Gaussian, RBF
#: kernel, all-ones, κ = 10¹⁶, graded diagonal, 1e4·ones + noise; n = 1 024 and 3 000;
#: float32 and float64; 20 seeds each) was 1.6.
PROBE_SAFETY = 32.0
_PROBE_SEED = 20261128


@torch.no_grad()
def check_finite_symmetric(matrix: torch.Tensor, name: str) -> bool:
    """Raise if ``matrix`` holds NaN/Inf; return whether it is symmetric to rounding.

    Two regimes, chosen by size:

    * ``n < PROBE_MIN_ROWS`` (and every non-square matrix): **exact**. Symmetric means
      ``max |A − Aᵀ| ≤ 100 eps · max |A|``: one ``aminmax`` (non-finite if any entry is
      NaN or Inf), then ``max |A − Aᵀ|`` from one temporary (at most 8 MiB). Where the
      probe hands a large matrix over, the tile pairs ``(I, J)``, ``J ≥ I``, give
      ``max |A[I, J] − A[J, I]ᵀ|`` with one tile of memory (about 5 products).
    * ``n ≥ PROBE_MIN_ROWS``: **probe**, two products. ``Y = A [u v]`` for Gaussian
      ``u, v`` from a fixed ``torch.Generator`` (same answer on every call), through
      :func:`~pnsolve.linops.dense.dense_matmat`. Every entry of ``u, v`` is nonzero,
      so a NaN or Inf anywhere in ``A`` makes ``Y`` non-finite; the matrix is then
      scanned to name which. ``A`` passes if ``|uᵀAv − vᵀAu| ≤ 32 eps √n F`` with
      ``F = ‖Y‖_F / √2`` (``≈ ‖A‖_F``: ``E‖Au‖² = ‖A‖²_F``); otherwise, or if ``Y``
      overflowed, the exact check decides, so a probe never refuses a matrix the
      exact check accepts.

    What the probe misses: ``uᵀ(A − Aᵀ)v`` has standard deviation ``‖A − Aᵀ‖_F``, so
    an asymmetry is caught unless that one random number falls below the tolerance:
    tested, ``‖A − Aᵀ‖_F = 100 × 32 eps √n ‖A‖_F`` is refused in at least 95 % of 200
    cases (dense, one-entry, one-column and rank-one perturbations) and ``1 000 ×`` in
    all of them. Smaller asymmetries, which the exact rule refuses when they exceed
    ``100 eps max |A|``, may be accepted as symmetric: such a matrix differs from a
    symmetric one by about the rounding error of one product with it.

    Raises
    ------
    ValueError
        ``"{name} contains NaN values"`` or ``"... Inf values"``.
    """
    n, m = matrix.shape
    if matrix.numel() == 0:
        return n == m
    if n == m and n >= PROBE_MIN_ROWS:
        verdict = _probe(matrix, name)
        if verdict is not None:
            return verdict
    return _exact(matrix, name)


def _probe(matrix: torch.Tensor, name: str) -> bool | None:
    """``True`` if the probe passes; raises on NaN/Inf; ``None``: let the exact check decide."""
    from .dense import dense_matmat  # dense imports this module

    n = matrix.shape[0]
    # drawn on the host, the same vectors for every device; the product runs on A's
    gen = torch.Generator(device="cpu").manual_seed(_PROBE_SEED)
    UV = torch.randn(n, 2, generator=gen, dtype=torch.float64, device=gen.device)
    Y = dense_matmat(matrix, UV.to(device=matrix.device, dtype=matrix.dtype))
    Y = Y.to(device="cpu", dtype=torch.float64)
    # products and sums, not BLAS dots: MKL threads a dot, and its OpenMP worker then
    # spins for milliseconds on the core the next two-thread product needs
    skew = (UV[:, 0] * Y[:, 1]).sum() - (UV[:, 1] * Y[:, 0]).sum()
    values = torch.stack([skew, torch.linalg.vector_norm(Y)]).tolist()
    if not all(math.isfinite(v) for v in values):
        check_finite(matrix, name)
        return None  # finite entries, overflowing product
    tol = PROBE_SAFETY * torch.finfo(matrix.dtype).eps * math.sqrt(n) * values[1] / math.sqrt(2)
    return True if abs(values[0]) <= tol else None


def _exact(matrix: torch.Tensor, name: str) -> bool:
    n, m = matrix.shape
    worst = torch.zeros((), dtype=matrix.dtype, device=matrix.device)
    scale = _max_abs(matrix)  # NaN/Inf anywhere make it non-finite
    if n == m and n < PROBE_MIN_ROWS:  # small: one temporary (≤ 8 MiB), three passes
        worst = _max_abs(matrix - matrix.mT)
    elif n == m:  # tile pairs (I, J), J > I: the mirror tile is transposed while in cache
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
    if not all(math.isfinite(v) for v in values):
        check_finite(matrix, name)
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
