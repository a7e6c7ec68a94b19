"""The pivoted (partial) Cholesky preconditioner with a Woodbury inverse."""

from __future__ import annotations

import torch

from .._core.errors import MissingStructureError
from .._core.precision import full_float32
from ..linops.base import LinearOperator
from ._common import as_spd_operator, check_rank, positive_diagonal

__all__ = ["PivotedCholesky"]


class PivotedCholesky(LinearOperator):
    """Preconditioner ``P = L Lᵀ + D`` from a greedy pivoted partial Cholesky of ``A``.

    Products apply ``P⁻¹`` (pass it as ``M`` to :func:`pnsolve.cg`), through the
    Woodbury identity ``P⁻¹ = D⁻¹ − D⁻¹L (I + LᵀD⁻¹L)⁻¹ LᵀD⁻¹`` with a
    ``(rank × rank)`` Cholesky factor: ``O(n·rank)`` per column.

    The factorisation is matrix-free: it reads ``A.diagonal()`` once and one column
    of ``A`` per step (``A.row_block([i])`` of the symmetric operator, or a product
    with a unit vector when the operator has no row access); the ``n × n`` matrix is
    never formed.

    Parameters
    ----------
    A
        Symmetric positive (semi-)definite operator, shape ``(n, n)``, with a
        structured diagonal.
    rank
        Maximal number of pivots, ``≥ 1``; capped at ``n`` (a full pivoted Cholesky).
    shift
        ``None`` (default): ``D = diag(A) − diag(L Lᵀ)``, the residual diagonal (the
        diagonal of the Schur complement), raised to a positive floor (the smallest
        residual entry outside the pivots, at least ``10·eps·max diag A``; at the
        pivots the residual is exactly zero). A number ``σ² > 0``: ``D = σ² I``.
    tol
        Stop early once the residual trace ``tr(A) − tr(L Lᵀ)`` falls below
        ``tol · tr(A)``; default ``n·eps``. Also stops when no positive pivot is left.

    Notes
    -----
    For a kernel system ``K̂ = K + σ²I`` two uses are common:

    * ``PivotedCholesky(K̂, rank)``: factor ``K̂`` itself and use the residual
      diagonal (the Schur complement of ``K̂`` is ``≥ σ²``, so ``D ≥ σ²``);
    * ``PivotedCholesky(K, rank, shift=σ²)``: factor the noise-free kernel and add
      the noise as ``D = σ² I`` (GPyTorch's construction).

    Attributes
    ----------
    L
        Factor, shape ``(n, r)`` with ``r ≤ rank`` pivots taken.
    pivots
        Pivot indices in order, integer tensor of shape ``(r,)``.
    residual_trace
        ``tr(A − L_m L_mᵀ)`` after ``m = 0, …, r`` steps, shape ``(r + 1,)``.
    residual_diagonal
        ``diag(A − L Lᵀ)`` clamped at zero, shape ``(n,)``.
    D
        Diagonal of ``D``, shape ``(n,)``.
    """

    @full_float32
    def __init__(
        self,
        A: object,
        rank: int,
        *,
        shift: float | None = None,
        tol: float | None = None,
    ) -> None:
        A = as_spd_operator(A)
        n = A.shape[0]
        rank = check_rank(rank, n)
        eps = torch.finfo(A.dtype).eps
        tol = n * eps if tol is None else float(tol)
        if not tol >= 0:
            raise ValueError(f"tol must be non-negative, got {tol}")
        if shift is not None and not float(shift) > 0:
            raise ValueError(f"shift must be positive (or None), got {shift}")
        super().__init__(A.shape, A.dtype, A.device, is_symmetric=True, is_psd=True)
        with torch.no_grad():
            diag = positive_diagonal(A, "an SPD operator has a positive diagonal")
            self.L, self.pivots, self.residual_trace, self.residual_diagonal = _factor(
                A, diag, rank, tol
            )
            if shift is None:
                self.D = _floored_residual(self.residual_diagonal, self.pivots, diag, eps)
            else:
                self.D = torch.full_like(diag, float(shift))
            self._Dinv = 1.0 / self.D
            self._W = self._Dinv.unsqueeze(-1) * self.L  # D⁻¹ L, (n, r)
            r = self.L.shape[1]
            core = torch.eye(r, dtype=A.dtype, device=A.device) + self.L.mT @ self._W
            self._core_chol = torch.linalg.cholesky(0.5 * (core + core.mT))

    @property
    def rank(self) -> int:
        """Number of pivots taken."""
        return self.L.shape[1]

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        coef = torch.cholesky_solve(self._W.mT @ X, self._core_chol)
        return self._Dinv.unsqueeze(-1) * X - self._W @ coef

    def _diagonal(self) -> torch.Tensor:
        # diag(W C⁻¹ Wᵀ) = row norms of W C^{-T/2}, C = Lc Lcᵀ.
        V = torch.linalg.solve_triangular(self._core_chol, self._W.mT, upper=False)
        return self._Dinv - (V * V).sum(0)

    def logdet(self) -> torch.Tensor:
        """``log det P = Σ log D_ii + log det(I + LᵀD⁻¹L)`` (0-d tensor)."""
        return torch.log(self.D).sum() + 2 * torch.log(torch.diagonal(self._core_chol)).sum()


def _column(A: LinearOperator, i: int) -> torch.Tensor:
    """Column ``i`` of ``A``, shape ``(n,)``, without forming the matrix."""
    try:
        return A.column_block([i]).squeeze(-1)
    except MissingStructureError:
        e = torch.zeros(A.shape[1], 1, dtype=A.dtype, device=A.device)
        e[i] = 1
        return A.matmat(e).squeeze(-1)


def _factor(A: LinearOperator, diag: torch.Tensor, rank: int, tol: float):
    n = diag.shape[0]
    L = torch.zeros(n, rank, dtype=diag.dtype, device=diag.device)
    d = diag.clone()
    pivots: list[int] = []
    traces = [float(d.sum())]
    stop = tol * traces[0]
    for m in range(rank):
        i = int(torch.argmax(d))
        pivot = float(d[i])
        if pivot <= 0 or traces[-1] <= stop:
            break
        col = _column(A, i).detach()
        if m:
            col = col - L[:, :m] @ L[i, :m]
        L[:, m] = col / pivot**0.5
        d.sub_(L[:, m] ** 2).clamp_(min=0)
        d[i] = 0  # exactly: the Schur complement vanishes at the pivots
        pivots.append(i)
        traces.append(float(d.sum()))
    r = len(pivots)
    return (
        L[:, :r].contiguous(),
        torch.tensor(pivots, dtype=torch.long, device=diag.device),
        torch.tensor(traces, dtype=diag.dtype, device=diag.device),
        d,
    )


def _floored_residual(
    d: torch.Tensor, pivots: torch.Tensor, diag: torch.Tensor, eps: float
) -> torch.Tensor:
    floor = 10 * eps * float(diag.max())
    outside = torch.ones_like(d, dtype=torch.bool)
    outside[pivots] = False
    if bool(outside.any()):
        floor = max(floor, float(d[outside].min()))
    return d.clamp(min=floor)
