"""ULISSE's solver state at the truncation point, as a solution belief."""

from __future__ import annotations

import torch

from ..beliefs.gaussian_solution import GaussianSolutionBelief
from ..beliefs.priors import InversePrior
from ._ulisse_core import ulisse_trace
from .ulisse import validate_ulisse_arguments
from .ulisse_info import UlisseInfo

__all__ = ["ulisse_belief"]


def ulisse_belief(
    A: object,
    b: object,
    *,
    alpha: float,
    beta: float,
    generator: torch.Generator,
    x0: object = None,
    maxiter: int | None = None,
    M: object = None,
) -> tuple[GaussianSolutionBelief, torch.Tensor, UlisseInfo]:
    """Run ULISSE and return the CG state at its (random) truncation point as a belief.

    The CG directions ``p_1, …, p_J`` taken up to the truncation are ``A``-conjugate,
    so the state is the inverse-prior belief with ``C_J = Σ_j p_j p_jᵀ / (p_jᵀ A p_j)``
    and mean ``x_J`` (the plain CG iterate at truncation, a biased but low-variance
    point estimate), while the unbiased estimate ``x̃`` is returned next to it.

    Parameters
    ----------
    A, b, alpha, beta, generator, x0, maxiter, M
        As in :func:`pnsolve.randomized.ulisse`; ``b`` must have shape ``(n,)``.

    Returns
    -------
    belief : GaussianSolutionBelief
        ``N(x_J, A⁻¹ − C_J)`` under the inverse prior (prior mean ``x0``).
    estimate : torch.Tensor
        The unbiased ULISSE estimate ``x̃`` of ``A⁻¹ b``, shape ``(n,)``.
    info : UlisseInfo
        As returned by :func:`~pnsolve.randomized.ulisse`.
    """
    A, b, x0, alpha, beta, maxiter, M = validate_ulisse_arguments(
        A, b, x0, alpha, beta, generator, maxiter, M
    )
    if b.ndim != 1:
        raise ValueError(f"b must have shape ({A.shape[0]},) for a belief, got {tuple(b.shape)}")
    from .ulisse import _squeeze

    with torch.no_grad():
        trace = ulisse_trace(
            A, b.unsqueeze(-1), None if x0 is None else x0.unsqueeze(-1),
            alpha=alpha, beta=beta, generator=generator, maxiter=maxiter, M=M,
            keep_directions=True,
        )  # fmt: skip
        # kept: keep_directions=True
        assert trace.directions is not None and trace.operator_directions is not None
        P = trace.directions[..., 0].mT  # (n, J)
        AP = trace.operator_directions[..., 0].mT
        curvature = torch.linalg.vecdot(P, AP, dim=0)
        taken = curvature > 0
        scale = curvature[taken].rsqrt()
        V, AV = P[:, taken] * scale, AP[:, taken] * scale
    mean = trace.iterate[:, 0]
    belief = GaussianSolutionBelief(A, b, mean, InversePrior(), V, V, AV)
    info = _squeeze(_squeeze(trace.info, -1, per_column=True), 0, per_column=False)
    return belief, trace.estimates[0, :, 0], info
