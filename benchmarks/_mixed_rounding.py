"""Where mixed-precision CG's extra iterations come from (a table of ``bench_mixed_precision``).

A float32 product ``A₃₂ x₃₂`` (accumulated in float32) differs from ``A x`` by three
roundings: the stored matrix, the vector, and the accumulation. Each row runs CG to
``rtol = 1e-10`` with products that keep some of them, through ``cg_core``'s ``products``
(reliable updates and true residuals as in ``precision="mixed"``):

- ``matrix only``: ``float64(A₃₂) @ x``, the stored matrix rounded, nothing else;
- ``vector only``: ``A @ float64(x₃₂)``;
- ``float32 product``: what ``precision="mixed"`` computes.

The iteration ratio against float64 CG bounds the speed-up of any float32-stored matrix:
even the first row's products, were they free of every rounding but the matrix's, need
more iterations.
"""

from __future__ import annotations

import torch

import pnsolve as pn
from pnsolve.krylov.conjugate_gradient import cg_core
from pnsolve.krylov.mixed_precision import LowPrecisionProducts


class _Rounded(LowPrecisionProducts):
    """``precision="mixed"``'s operator whose products keep only the roundings of ``mode``."""

    def __init__(self, A: pn.linops.Dense, mode: str) -> None:
        super().__init__(A, "mixed")
        self.mode = mode
        self.rounded = A.matrix.to(torch.float32).to(torch.float64) if mode == "matrix" else None

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        if self.rounded is not None:
            return self.rounded @ X
        if self.mode == "vector":
            return self.full.matrix @ X.to(torch.float32).to(torch.float64)
        return super()._matmat(X)


def rounding_rows(A: pn.linops.Dense, rtol: float) -> list[list[object]]:
    """Iterations and true-residual checks of CG with each rounding kept (rows of the table)."""
    n = A.shape[0]
    b = torch.randn(n, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    tolerances = rtol * torch.linalg.vector_norm(b, dim=0)
    _, full = cg_core(A, b, tolerances=tolerances, maxiter=20 * n)
    rows: list[list[object]] = [
        ["float64 products", full.iterations, full.true_residual_checks, 1.0]
    ]
    for label, mode in (
        ("matrix only", "matrix"),
        ("vector only", "vector"),
        ("float32 product", "all"),
    ):
        X, info = cg_core(A, b, tolerances=tolerances, maxiter=20 * n, products=_Rounded(A, mode))
        relres = float(torch.linalg.vector_norm(b - A.matmat(X)) / torch.linalg.vector_norm(b))
        assert relres <= rtol, f"{label}: true relres {relres:.2e}"
        rows.append(
            [label, info.iterations, info.true_residual_checks, info.iterations / full.iterations]
        )
    return rows
