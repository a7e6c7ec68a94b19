"""A running estimate of ``κ(A)`` from CG's own step sizes, for mixed-precision runs.

CG's ``α_j, β_j`` are the Lanczos tridiagonal ``T`` in disguise (Golub & Van Loan
§11.3.5): ``T_jj = 1/α_j + β_{j-1}/α_{j-1}``, ``T_{j,j+1} = √β_j / α_j``. Its extreme
eigenvalues (Ritz values) approach ``λ_max`` and ``λ_min`` from inside within a few
dozen iterations (measured on RBF kernel matrices with κ from 1e3 to 1e6: within 10 %
after 40 iterations), so ``κ(T)`` is a lower estimate of ``κ(A)`` that costs no product.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["MIXED_CONDITION_LIMIT", "ConditionMonitor", "condition_limit"]

#: Largest ``κ(A)`` for which float32 products keep CG within about 1.5× the iterations
#: of float64 products (rtol 1e-10). Measured on RBF kernel matrices (n = 2000, 3-d
#: Gaussian inputs, noise 1 to 1e-3): κ = 41, 133, 1.3e3, 4.9e3, 4.9e4 and 1.1e6 took
#: 1.09, 1.10, 1.23, 1.49, 1.6 and 2.7× the float64 iterations.
MIXED_CONDITION_LIMIT = 5e3

#: Exponent of the limit's dependence on the products' roundoff: bfloat16 products
#: (eps 7.8e-3) took 1.27× at κ = 41 and 1.87× at κ = 133 on the same matrices, so the
#: limit falls like ``eps^-0.37`` between the two (about 80 for bfloat16, 180 for TF32).
_LIMIT_EXPONENT = -0.37


def condition_limit(eps: float) -> float:
    """Largest ``κ(A)`` worth low-precision products with roundoff ``eps`` (see above)."""
    return MIXED_CONDITION_LIMIT * (eps / torch.finfo(torch.float32).eps) ** _LIMIT_EXPONENT


_FIRST_CHECK = 10


class ConditionMonitor:
    """Records ``α_j`` and ``β_j`` of every column; estimates ``κ`` at 10, 20, 40, … iterations.

    Parameters
    ----------
    k
        Number of columns of the run.
    like
        A tensor with the run's dtype and device.
    """

    def __init__(self, k: int, like: torch.Tensor) -> None:
        self._k = k
        self._like = like
        self._alpha: list[torch.Tensor] = []
        self._beta: list[torch.Tensor] = []
        self._next = _FIRST_CHECK

    def _row(self, idx: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        row = self._like.new_full((self._k,), math.nan)
        return row.index_copy_(0, idx, values.to(row.dtype))

    def record_alpha(self, idx: torch.Tensor, alpha: torch.Tensor) -> None:
        """``α_j`` of the active columns ``idx`` (shapes ``(ka,)``)."""
        self._alpha.append(self._row(idx, alpha))

    def record_beta(self, idx: torch.Tensor, beta: torch.Tensor) -> None:
        """``β_j`` of the columns still active after iteration ``j`` (shapes ``(ka,)``)."""
        self._beta.append(self._row(idx, beta))

    def due(self) -> bool:
        """Whether an estimate is scheduled now (iterations 10, 20, 40, … recorded)."""
        return len(self._alpha) >= self._next

    def estimate(self, column: int) -> float:
        """``κ(T)`` of ``column`` (active throughout) from its recorded steps; reschedules.

        One host transfer of the recorded steps; ``O(iterations)`` bisection for the two
        extreme eigenvalues.
        """
        from scipy.linalg import eigvalsh_tridiagonal  # on first use: pnsolve imports fast

        self._next = 2 * len(self._alpha)
        m = min(len(self._alpha), len(self._beta))
        a = torch.stack(self._alpha[:m])[:, column].cpu().double().numpy()
        b = torch.stack(self._beta[:m])[:, column].cpu().double().numpy()
        if not (np.isfinite(a).all() and np.isfinite(b).all()) or (a <= 0).any():
            return math.nan
        diag = 1.0 / a
        diag[1:] += b[:-1] / a[:-1]
        off = np.sqrt(np.maximum(b[:-1], 0.0)) / a[:-1]
        lo = eigvalsh_tridiagonal(diag, off, select="i", select_range=(0, 0))[0]
        hi = eigvalsh_tridiagonal(diag, off, select="i", select_range=(m - 1, m - 1))[0]
        return float(hi / lo) if lo > 0 else math.inf
