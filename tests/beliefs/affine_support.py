"""Dense references for the affine iterative methods: ``P_m`` from the splitting ``M``.

Written from the textbook formulas, independently of the sweeps in
``pnsolve.iterative``: ``P_m = Σ_{j<m} (I − M⁻¹A)^j M⁻¹`` for a splitting ``M``, and
``P_m = V diag((1 − r_m(λ))/λ) Vᵀ`` with the scaled Chebyshev residual polynomial.
"""

from __future__ import annotations

import torch

import pnsolve as pn
from pnsolve.iterative import (
    Chebyshev,
    CyclicProjections,
    GaussSeidel,
    JacobiIteration,
    Richardson,
)


def splitting(A: torch.Tensor, method: pn.iterative.AffineMethod, damping: float) -> torch.Tensor:
    """The splitting matrix ``M`` of a stationary method (``x ← x + M⁻¹(b − Ax)``)."""
    n = A.shape[0]
    D = torch.diag(A.diagonal())
    if isinstance(method, Richardson):
        return torch.eye(n, dtype=A.dtype) / damping
    if isinstance(method, JacobiIteration):
        return D / damping
    if isinstance(method, GaussSeidel):
        lower, diag, upper = A.tril(), D, A.triu()  # D + L, D, D + U
    elif isinstance(method, CyclicProjections):
        b = method.block_size
        block = torch.arange(n) // b
        same = block[:, None] == block[None, :]
        diag = A * same
        lower = A * (block[:, None] >= block[None, :])  # D_B + L_B
        upper = lower.mT
    else:
        raise TypeError(type(method).__name__)
    if method.symmetric:
        return lower @ torch.linalg.solve(diag, upper)
    return lower


def chebyshev_P(A: torch.Tensor, m: int, lower: float, upper: float) -> torch.Tensor:
    """``P_m = (I − r_m(A)) A⁻¹`` by eigendecomposition."""
    lam, V = torch.linalg.eigh(A)

    def T(t: torch.Tensor) -> torch.Tensor:
        prev, cur = torch.ones_like(t), t
        if m == 0:
            return prev
        for _ in range(m - 1):
            prev, cur = cur, 2 * t * cur - prev
        return cur

    scale = torch.tensor((upper + lower) / (upper - lower), dtype=A.dtype)
    r = T((upper + lower - 2 * lam) / (upper - lower)) / T(scale)
    return V @ torch.diag((1 - r) / lam) @ V.mT


def dense_P(A: torch.Tensor, method: pn.iterative.AffineMethod, parameters: dict) -> torch.Tensor:
    """``P_m`` of ``method`` on dense ``A`` (``parameters``: the operator's set-up numbers)."""
    m = method.sweeps
    if isinstance(method, Chebyshev):
        return chebyshev_P(A, m, parameters["lower"], parameters["upper"])
    M_inv = torch.linalg.inv(splitting(A, method, parameters.get("damping", 1.0)))
    G = torch.eye(A.shape[0], dtype=A.dtype) - M_inv @ A
    P, term = torch.zeros_like(A), M_inv
    for _ in range(m):
        P = P + term
        term = G @ term
    return P


def methods(m: int) -> dict[str, pn.iterative.AffineMethod]:
    """One of each affine method (small blocks, so several per test matrix) with ``m`` sweeps."""
    return {
        "gauss_seidel": GaussSeidel(m, block_size=5),
        "gauss_seidel_forward": GaussSeidel(m, symmetric=False, block_size=7),
        "jacobi": JacobiIteration(m),
        "richardson": Richardson(m),
        "richardson_gershgorin": Richardson(m, bound="gershgorin"),
        "chebyshev": Chebyshev(m),
        "cyclic_projections": CyclicProjections(m, block_size=6),
        "cyclic_projections_symmetric": CyclicProjections(m, block_size=6, symmetric=True),
    }


def spd(n: int = 24, cond: float = 100.0, seed: int = 0) -> torch.Tensor:
    """Exactly symmetric SPD test matrix with a non-constant diagonal (Jacobi ≠ Richardson)."""
    lam = pn.problems.spectrum("exponential", n, cond=cond)
    g = torch.Generator().manual_seed(seed)
    A = pn.problems.spd_from_spectrum(lam.to(torch.float64), generator=g).A.to_dense()
    return 0.5 * (A + A.mT)
