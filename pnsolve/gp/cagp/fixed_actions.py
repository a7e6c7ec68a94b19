"""CaGP with ``actions=`` a policy: the policy's first ``i`` actions, kept fixed.

The actions are dense ``(n, i)`` columns (``SᵀS`` a full ``i × i`` matrix), chosen once
on ``K̂`` at the initial hyperparameters; only the hyperparameters learn afterwards.
"""

from __future__ import annotations

import torch

from ...kernels.kernel import Kernel
from ...linops.base import LinearOperator
from ...policies.base import Policy
from ...solvers.solver import ProbabilisticLinearSolver
from ...stopping.criteria import MaxIterations

__all__ = ["dense_action_products", "policy_actions"]


def policy_actions(
    policy: Policy, system: LinearOperator, y_centred: torch.Tensor, i: int,
    generator: torch.Generator,
) -> torch.Tensor:  # fmt: skip
    """The first ``i`` distinct actions of ``policy`` solving ``K̂ x = y − μ``, ``(n, i)``.

    Raises
    ------
    ValueError
        If the solve converges or breaks down before ``i`` actions (names the policy).
    """
    n = y_centred.shape[0]
    solver = ProbabilisticLinearSolver(policy, MaxIterations(i))
    columns, last = [], 0
    with torch.no_grad():
        for state in solver.iterate(system, y_centred, generator=generator):
            if state.action is not None and state.iteration > last:  # not a repeat
                columns.append(state.action.reshape(n, -1))
                last = state.iteration
    S = torch.cat(columns, 1)[:, :i] if columns else y_centred.new_zeros(n, 0)
    if S.shape[1] < i:
        raise ValueError(
            f"the policy {type(policy).__name__} stopped after {S.shape[1]} of "
            f"num_actions = {i} actions (the solve converged or broke down): ask "
            "for fewer actions"
        )
    return S


def dense_action_products(
    kernel: Kernel, X: torch.Tensor, backend: str, S: torch.Tensor,
    y_centred: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """``(K S, Sᵀ K S, Sᵀ(y − μ), SᵀS, log |SᵀS|)`` for dense actions ``S`` ``(n, i)``."""
    KS = kernel.linop(X, backend=backend) @ S
    gram = S.mT @ S
    log_det = torch.linalg.slogdet(gram.to(torch.float64))[1]
    return KS, S.mT @ KS, S.mT @ y_centred, gram, log_det
