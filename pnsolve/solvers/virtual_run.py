"""The virtual solver run: a belief from a Krylov buffer's actions, without products with ``K``."""

from __future__ import annotations

import torch

from ..beliefs.gaussian_solution import GaussianSolutionBelief
from ..krylov.buffer import KrylovBuffer
from ..linops.base import LinearOperator
from ..linops.checks import as_operand, as_square_operator
from ..policies.cg import CG
from ..stopping.criteria import MaxIterations
from .solver import ProbabilisticLinearSolver

__all__ = ["virtual_run"]


def virtual_run(buffer: KrylovBuffer, A: object, b: object) -> GaussianSolutionBelief:
    """The belief about ``A⁻¹ b`` after conditioning on every buffered action.

    No product with ``K``: ``A S`` comes from :meth:`KrylovBuffer.images_for`. The
    belief has root ``V = S Q Λ^{-½}`` (``Sᵀ A S = Q Λ Qᵀ``, rounding-level and
    untrustworthy directions dropped), ``C₀ = V Vᵀ`` and mean ``C₀ b``, under the
    inverse prior (Tatzel et al., 2024, §3.3). Passing the buffer to a solver as
    ``buffer=`` starts the solve from exactly this belief.

    Parameters
    ----------
    buffer
        The :class:`~pnsolve.krylov.KrylovBuffer` (not modified).
    A
        ``K`` or ``K + D``, shape ``(n, n)``, with ``K`` the buffer's fixed part.
    b
        Right-hand side, shape ``(n,)``.

    Returns
    -------
    GaussianSolutionBelief
        The belief before any new action.
    """
    if not isinstance(buffer, KrylovBuffer):
        raise TypeError(f"buffer must be a KrylovBuffer, got {type(buffer).__name__}")
    A = as_square_operator(A, "A")
    b = as_operand(b, A, "b", allow_matrix=False)
    buffer.images_for(A)  # structure check: A must be K or K + D
    solver = ProbabilisticLinearSolver(CG(), MaxIterations(0))
    belief, _ = solver.solve(A, b, buffer=_Frozen(buffer))
    return belief


class _Frozen:
    """Read-only view of a buffer (no recording of new actions)."""

    def __init__(self, buffer: KrylovBuffer) -> None:
        self.actions = buffer.actions
        self._buffer = buffer

    def images_for(self, A: LinearOperator) -> torch.Tensor:
        return self._buffer.images_for(A)
