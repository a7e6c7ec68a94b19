"""Preconditioners for :func:`pnsolve.cg`: linear operators whose products apply ``P⁻¹``.

:class:`Jacobi` (``P = diag A``), :class:`PivotedCholesky` (``P = L Lᵀ + D``) and
:class:`Nystrom` (randomized Nyström, ``P ≈ A + μI``). Each is a
:class:`~pnsolve.linops.LinearOperator`, passed to ``cg`` as ``M`` (``M ≈ A⁻¹``).
"""

from .jacobi import Jacobi
from .nystrom import Nystrom
from .pivoted_cholesky import PivotedCholesky

__all__ = ["Jacobi", "Nystrom", "PivotedCholesky"]
