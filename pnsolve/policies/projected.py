"""Project another policy's actions onto a subspace (singular systems with a known null space)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..linops.base import LinearOperator
from ..linops.conversion import as_linop
from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["Projected"]


class Projected(Policy):
    """The actions of ``policy``, multiplied by a projector ``P``.

    For a positive semi-definite ``A`` whose null space ``N`` is known and whose
    right-hand side lies in ``range(P) = N^⊥`` (e.g. IterNCGP's softmax systems
    ``P K P + W⁺``, singular along each point's all-ones class direction), the
    solution of minimal norm lives in ``range(P)``. A policy's actions lie there in
    exact arithmetic but pick up rounding noise along ``N``; once the residual reaches
    rounding level (CG run past convergence) the action *is* mostly such noise, its
    curvature is tiny, and conditioning on it inflates the belief along ``N``
    without bound. Projecting every action keeps the belief in ``range(P)``, where
    ``A`` is definite.

    Parameters
    ----------
    policy
        The policy whose actions are projected (its memory is passed through).
    projector
        Symmetric projector ``P`` of shape ``(n, n)`` (anything
        :func:`~pnsolve.linops.as_linop` accepts); applied once per action block,
        no product with ``A``.
    """

    def __init__(self, policy: Policy, projector: object) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a Policy, got {type(policy).__name__}")
        P = as_linop(projector)
        if P.shape[0] != P.shape[1]:
            raise ValueError(f"projector must be square, got shape {tuple(P.shape)}")
        self.policy = policy
        self.projector: LinearOperator = P

    @property
    def adaptive(self) -> bool:
        """The wrapped policy's: a fixed projector adds no dependence on ``b``."""
        return self.policy.adaptive

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> object:
        """The wrapped policy's initial memory (shape-checked against ``projector``)."""
        if A.shape != self.projector.shape:
            raise ValueError(
                f"projector has shape {tuple(self.projector.shape)} but A has shape "
                f"{tuple(A.shape)}"
            )
        return self.policy.initial_memory(A, b, generator)

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, object]:
        """The wrapped policy's actions, projected onto ``range P``."""
        S, memory = self.policy(state, generator)
        return self.projector @ S, memory

    def __repr__(self) -> str:
        return f"Projected({self.policy!r})"
