"""Reliable updates of a mixed-precision probabilistic solve (``precision="mixed"``)."""

from __future__ import annotations

import dataclasses

import torch

from ..krylov.breakdown import RELIABLE_UPDATE_FACTOR
from ..krylov.mixed_precision import product_eps, reliable_update_factor
from ..linops.base import LinearOperator
from .state import SolverState

__all__ = ["ResidualRefresh"]


class ResidualRefresh:
    """Reliable updates of a mixed-precision solve: the true residual, now and then.

    The recursive residual ``r ← r − AC g`` carries the float32 error of the images;
    once ``‖r‖`` has dropped by the factor :func:`~pnsolve.krylov.cg` uses for the same
    products (:data:`RELIABLE_UPDATE_FACTOR`, or ``√eps`` for bfloat16) since the last
    replacement, it is replaced by ``b − A x`` with ``A`` in float64 (one product).

    Parameters
    ----------
    A
        The full-precision operator, shape ``(n, n)``.
    b
        The right-hand side, shape ``(n,)``.
    products
        The operator of the solver's products (its roundoff sets the factor).
    """

    def __init__(self, A: LinearOperator, b: torch.Tensor, products: LinearOperator) -> None:
        self.A, self.b = A, b
        self.factor = reliable_update_factor(product_eps(products), RELIABLE_UPDATE_FACTOR)
        self.rmax = float(torch.linalg.vector_norm(b))

    def __call__(self, state: SolverState) -> SolverState:
        """The state after an update, its residual replaced where it is due (else as is)."""
        if state.stop_reason is not None:
            return state
        rn = state.residual_norm_value
        rn = float(state.residual_norm) if rn is None else rn
        if rn > self.factor * self.rmax:
            self.rmax = max(self.rmax, rn)
            return state
        belief = state.belief
        r = self.b - self.A @ belief.mean
        # Galerkin correction: with exact images Tᵀ r = 0; float32 images leave a part of
        # the true residual in the observed directions, which later actions cannot reach
        # (they would read as dependent). One projection removes it (no product).
        g = belief.T.mT @ r
        belief = dataclasses.replace(belief, mean=belief.mean + belief.V @ g)
        r = r - belief.W @ g
        norm = torch.linalg.vector_norm(r)
        self.rmax = float(norm)
        return dataclasses.replace(
            state, belief=belief, residual=r, residual_norm=norm, residual_norm_value=None,
            products=state.products + 1, matvecs=state.matvecs + 1,
        )  # fmt: skip
