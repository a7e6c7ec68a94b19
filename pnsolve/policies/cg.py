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
    """Actions spanning ``M r_i``, the (preconditioned) residual: CG's search directions.

    The action is ``M r_i`` ``A``-conjugated against the newest observed direction
    (which is CG's search direction ``p_i`` up to scale; under a general prior simply
    ``M r_i``). The span of the actions, and so the belief, is that of the residuals.
    With the inverse prior the solver ``A``-conjugates each action against all
    previous ones, so the mean equals the CG iterate in exact arithmetic (and keeps
    full conjugacy in floating point, which plain CG loses).

    Parameters
    ----------
    preconditioner
        ``M ≈ A⁻¹`` (anything :func:`~pnsolve.linops.as_linop` accepts); ``None`` uses
        the solver's ``preconditioner`` if it has one, else ``M = I``.

    Notes
    -----
    :attr:`adaptive` is ``True``: the beliefs are not calibrated. For calibrated
    beliefs use a non-adaptive policy (``Lanczos(start="random")``,
    ``UnitVector("schur")``, :class:`Random`).
    """

    def __init__(self, preconditioner: object = None) -> None:
        self.preconditioner: LinearOperator | None = (
            None if preconditioner is None else as_linop(preconditioner)
        )

    @property
    def adaptive(self) -> bool:
        """``True``: the actions are residuals ``b − A x_i``, so they depend on ``b``.

        CG's belief is therefore not calibrated (measured: over-confident in the first
        iterations, far too wide later); its computational variance is no error bar.
        """
        return True

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, object]:
        """The (preconditioned) residual, conjugated against the newest direction."""
        M = self.preconditioner if self.preconditioner is not None else state.preconditioner
        z = state.residual if M is None else M @ state.residual
        V, AV = state.belief.V, state.belief.W
        if V.shape[1] and state.belief.T is V:
            # CG's search direction: z conjugated against the newest direction only. Same
            # span as z (the belief is unchanged in exact arithmetic), but the solver's
            # full conjugation then meets no heavy cancellation, so no second pass.
            # (A product and a sum, not a BLAS dot: on the CPU, MKL's threaded dot leaves
            # an OpenMP worker spinning on the second core for milliseconds, which
            # halved the speed of the two-thread dense product that follows.)
            z = z - V[:, -1] * (AV[:, -1] * z).sum()
        return z, None

    def __repr__(self) -> str:
        return f"CG(preconditioner={self.preconditioner!r})"
