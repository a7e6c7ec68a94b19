"""Block-row sweeps: the engine of Gauss–Seidel and cyclic alternating projections.

A *pass* visits the blocks ``I`` of consecutive rows in order (forward) or in reverse
(backward) and updates, in residual form,

``Δ = S_I⁻¹ R[I]``,  ``X[I] += Δ``,  ``R −= A[:, I] Δ``,

with ``S_I`` the lower triangle of ``A[I, I]`` (point Gauss–Seidel: the block is only
a unit of work, any block size gives the same iterates) or ``A[I, I]`` itself (block
Gauss–Seidel = alternating projections onto the blocks' rows). A backward pass uses
``S_Iᵀ``. One pass reads every row of ``A`` once (``n²`` entries, the cost of one
product); the residual it keeps is exact up to rounding (no extra product).
"""

from __future__ import annotations

import torch

from .._core.errors import NotPositiveDefiniteError
from ..linops.base import LinearOperator
from ..linops.dense import Dense
from .affine import Sweeper
from .divergence import DIVERGENCE_FACTOR, ResidualWatch, growth_text
from .spectral_bounds import check_positive_diagonal
from .system import KernelSystem

__all__ = ["BlockSweeper"]


class BlockSweeper(Sweeper):
    """Sweeps of forward and backward block passes over ``A``'s rows.

    Parameters
    ----------
    A
        Symmetric operator with row access (a stored matrix, a
        :class:`~pnsolve.iterative.KernelSystem`, or anything with ``row_block``).
    block_size
        Rows per block (capped at ``n``).
    symmetric
        Whether a sweep is a forward pass then a backward one (symmetric) or a forward
        pass only.
    kind
        ``"triangular"`` (point Gauss–Seidel: ``S_I`` the lower triangle of ``A[I, I]``)
        or ``"cholesky"`` (block Gauss–Seidel: ``S_I = A[I, I]``).
    what
        The method's name for error messages.

    Notes
    -----
    The diagonal-block factors are computed here, at set-up, from ``A`` only (``b²``
    entries per block for a :class:`~pnsolve.iterative.KernelSystem`, one row pass for
    a generic operator, nothing for a stored matrix) and kept: ``n·b`` memory.
    """

    def __init__(
        self,
        A: LinearOperator,
        block_size: int,
        symmetric: bool,
        kind: str,
        what: str,
    ) -> None:
        n = A.shape[0]
        b = min(block_size, n)
        self.blocks = [(lo, min(lo + b, n)) for lo in range(0, n, b)]
        #: The passes of one sweep: ``False`` forward, ``True`` backward.
        self.passes = (False, True) if symmetric else (False,)
        self.kind = kind
        self.what = what
        self.symmetric = symmetric
        self.row_passes_per_sweep = len(self.passes)
        # the error's A-norm never grows: ‖r_m‖ ≤ √κ(A) ‖r₀‖ < ‖r₀‖/√eps for any A that
        # is positive definite in working precision
        self.growth_bound = torch.finfo(A.dtype).eps ** -0.5
        self._rows = _rows(A, self.blocks)
        with torch.no_grad():
            self._factors = [self._factor(i) for i in range(len(self.blocks))]

    def _factor(self, i: int) -> torch.Tensor:
        lo, hi = self.blocks[i]
        block = self._rows.block(i)
        if self.kind == "triangular":
            check_positive_diagonal(block.diagonal(), self.what, lo)
            return block.tril()
        L, info = torch.linalg.cholesky_ex(block)
        if int(info) != 0:
            raise NotPositiveDefiniteError(
                f"A is not positive definite: its diagonal block {i} (rows {lo}:{hi}) has no "
                f"Cholesky factor ({self.what} solves with it; increase the noise or use "
                "float64)"
            )
        return L

    def _solve(self, i: int, R: torch.Tensor, backward: bool) -> torch.Tensor:
        F = self._factors[i]
        if self.kind == "cholesky":
            return torch.cholesky_solve(R, F)
        if backward:
            return torch.linalg.solve_triangular(F.mT, R, upper=True)
        return torch.linalg.solve_triangular(F, R, upper=False)

    def run(
        self, X: torch.Tensor, R: torch.Tensor, sweeps: int, transpose: bool, watch: ResidualWatch
    ) -> list[float]:
        """``sweeps`` sweeps in place; ``transpose`` reverses the passes and their directions."""
        passes = tuple(not p for p in reversed(self.passes)) if transpose else self.passes
        forward = list(range(len(self.blocks)))
        norms = []
        for sweep in range(sweeps):
            for backward in passes:
                for i in reversed(forward) if backward else forward:
                    lo, hi = self.blocks[i]
                    delta = self._solve(i, R[lo:hi], backward)
                    X[lo:hi] += delta
                    self._rows.subtract(R, i, delta)
            norms.append(watch.check(R, sweep + 1))
        return norms

    def diverged(self, sweep: int, start: float, now: float) -> Exception:
        """These sweeps converge for every SPD ``A``: divergence means ``A`` is not."""
        return NotPositiveDefiniteError(
            f"{self.what} diverges: {growth_text(start, now, sweep)}, more than "
            f"{DIVERGENCE_FACTOR:g}/√eps times its start; its sweeps converge for every "
            "symmetric positive definite matrix, so A is not positive definite (or "
            "singular in working precision: increase the noise or use float64)"
        )


class _Rows:
    """Row access ``A[I, I]`` and ``R −= A[:, I] Δ`` for any operator with ``row_block``."""

    def __init__(self, A: LinearOperator, blocks: list[tuple[int, int]]) -> None:
        self.A = A
        self.blocks = blocks

    def rows(self, i: int) -> torch.Tensor:
        lo, hi = self.blocks[i]
        return self.A.row_block(slice(lo, hi))

    def block(self, i: int) -> torch.Tensor:
        lo, hi = self.blocks[i]
        return self.rows(i)[:, lo:hi]

    def subtract(self, R: torch.Tensor, i: int, delta: torch.Tensor) -> None:
        # A symmetric: A[:, I] Δ = (Δᵀ A[I, :])ᵀ, one GEMM over contiguous rows
        R.sub_((delta.mT @ self.rows(i)).mT)


class _DenseRows(_Rows):
    """A stored matrix: row blocks are views (no copy)."""

    def rows(self, i: int) -> torch.Tensor:
        assert isinstance(self.A, Dense)
        lo, hi = self.blocks[i]
        return self.A.matrix[lo:hi]


class _SystemRows(_Rows):
    """A :class:`KernelSystem`: counted ``block`` and ``columns`` accesses (``b²``, ``b·n``)."""

    def __init__(self, A: KernelSystem, blocks: list[tuple[int, int]]) -> None:
        super().__init__(A, blocks)
        self.system = A
        self.index = [torch.arange(lo, hi, device=A.device) for lo, hi in blocks]

    def block(self, i: int) -> torch.Tensor:
        return self.system.block(self.index[i])

    def subtract(self, R: torch.Tensor, i: int, delta: torch.Tensor) -> None:
        R.sub_(self.system.columns(self.index[i], delta))


def _rows(A: LinearOperator, blocks: list[tuple[int, int]]) -> _Rows:
    if isinstance(A, KernelSystem):
        return _SystemRows(A, blocks)
    if isinstance(A, Dense):
        return _DenseRows(A, blocks)
    return _Rows(A, blocks)
