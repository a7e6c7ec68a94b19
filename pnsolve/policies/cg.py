"""The conjugate-gradient policy: observe the (preconditioned) residual."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..linops.base import LinearOperator
from ..linops.conversion import as_linop
from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["CG"]


class CG(Policy):
    """Actions ``s_i = M r_i``: the (preconditioned) residual.

    With the inverse prior the solver ``A``-conjugates each action against all
    previous ones, so the mean equals the CG iterate in exact arithmetic (and keeps
    full conjugacy in floating point, which plain CG loses).

    Parameters
    ----------
    preconditioner
        ``M ≈ A⁻¹`` (anything :func:`~pnsolve.linops.as_linop` accepts); ``None`` uses
        the solver's ``preconditioner`` if it has one, else ``M = I``.
    """

    def __init__(self, preconditioner: object = None) -> None:
        self.preconditioner: LinearOperator | None = (
            None if preconditioner is None else as_linop(preconditioner)
        )

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, object]:
        M = self.preconditioner if self.preconditioner is not None else state.preconditioner
        r = state.residual
        return (r if M is None else M @ r), None

    def __repr__(self) -> str:
        return f"CG(preconditioner={self.preconditioner!r})"
