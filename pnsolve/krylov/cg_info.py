"""The typed record returned by :func:`pnsolve.cg`."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .._core.info import IterationInfo
from .._core.stop_reason import StopReason
from ..linops.base import LinearOperator

__all__ = ["CGInfo", "ProductCount", "squeezed", "stop_reason_of"]


@dataclass(frozen=True, kw_only=True)
class CGInfo(IterationInfo):
    """What a run of :func:`pnsolve.cg` did.

    Shapes below are for a right-hand side ``b`` of shape ``(n, k)``; for ``b`` of
    shape ``(n,)`` the column dimension is dropped, exactly as for ``x``
    (``residual_norms`` has shape ``(iterations + 1,)``, ``converged`` is a 0-d tensor).

    Attributes
    ----------
    iterations
        Number of CG iterations run (the most any column ran).
    products
        Number of product calls with ``A``. Each call multiplies the block of
        still-active columns. Exactly
        ``(1 if x0 is given) + iterations + true_residual_checks``.
    matvecs
        Number of columns multiplied with ``A`` over all product calls.
    true_residual_checks
        Number of extra product calls that recomputed the true residual
        ``b − A x`` (before claiming convergence, for periodic residual
        replacement in low precision, and once at exit for columns that did not
        converge).
    residual_norms
        ``‖r_j‖`` after each iteration, shape ``(iterations + 1, k)``; row 0 is the
        initial residual. At iterations where the true residual was recomputed the
        row holds the true residual. A frozen (stopped) column repeats its final
        value.
    true_residual_norms
        ``‖b_j − A x_j‖`` at exit, computed from the returned ``x``, shape ``(k,)``.
    tolerances
        Per-column thresholds ``max(rtol·‖b_j‖, atol)``, shape ``(k,)``.
    column_iterations
        Iteration at which each column stopped (or the total for active columns),
        integer tensor of shape ``(k,)``.
    converged
        Whether each column met its tolerance (on the true residual), bool, shape ``(k,)``.
    stop_reason
        Why the run ended: ``CONVERGED`` (all columns), ``ZERO_RHS`` (``b = 0``),
        ``MAX_ITERATIONS``, ``CALLBACK`` or ``BREAKDOWN`` (a search direction with
        zero curvature at rounding level, i.e. no further progress possible).
    precision
        Precision of the iteration products at exit: the solver's ``precision`` argument,
        or ``"full"`` where a mixed-precision run fell back to full-precision products
        (with a warning) because the low-precision ones stalled the true residual.
    """

    matvecs: int
    true_residual_checks: int
    true_residual_norms: torch.Tensor
    tolerances: torch.Tensor
    column_iterations: torch.Tensor
    converged: torch.Tensor
    precision: str = "full"

    @property
    def success(self) -> bool:
        """Whether every column converged (``b = 0`` counts as converged)."""
        return bool(self.converged.all())


class ProductCount:
    """Counts products with ``A``, columns multiplied and true-residual checks.

    These are what :class:`CGInfo` reports; ``count(A, V)`` returns ``A @ V``.
    """

    def __init__(self) -> None:
        self.products = self.matvecs = self.checks = 0

    def __call__(self, A: LinearOperator, V: torch.Tensor, check: bool = False) -> torch.Tensor:
        """``A @ V``, shape ``(n, k)``, counted as one product of ``k`` columns.

        ``check`` marks the product as a true-residual check.
        """
        self.products += 1
        self.matvecs += V.shape[1]
        self.checks += int(check)
        return A.matmat(V)


def stop_reason_of(
    converged: torch.Tensor,
    zero_rhs: torch.Tensor,
    broken: torch.Tensor,
    stagnated: torch.Tensor,
    by_callback: bool,
) -> StopReason:
    """Why a run ended, from the per-column outcomes (bool tensors of shape ``(k,)``)."""
    if bool(zero_rhs.all()):
        return StopReason.ZERO_RHS
    if bool(converged.all()):
        return StopReason.CONVERGED
    if by_callback:
        return StopReason.CALLBACK
    if not bool((converged | broken | stagnated).all()):
        return StopReason.MAX_ITERATIONS
    return StopReason.BREAKDOWN if bool(broken.any()) else StopReason.STAGNATION


def squeezed(info: CGInfo) -> CGInfo:
    """Drop the column dimension of a single right-hand side's record."""
    return replace(
        info,
        residual_norms=info.residual_norms.squeeze(-1),
        true_residual_norms=info.true_residual_norms.squeeze(-1),
        tolerances=info.tolerances.squeeze(-1),
        column_iterations=info.column_iterations.squeeze(-1),
        converged=info.converged.squeeze(-1),
    )
