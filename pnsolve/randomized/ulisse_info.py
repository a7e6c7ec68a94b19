"""The typed record returned by :func:`pnsolve.randomized.ulisse`."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.info import IterationInfo

__all__ = ["UlisseInfo"]


@dataclass(frozen=True, kw_only=True)
class UlisseInfo(IterationInfo):
    """What one run of :func:`~pnsolve.randomized.ulisse` did.

    Shapes below are for ``b`` of shape ``(n, k)`` and ``E = num_estimates`` estimates.
    For ``b`` of shape ``(n,)`` the column dimension ``k`` is dropped, and without
    ``num_estimates`` the estimate dimension is dropped, exactly as for ``x`` (so a
    plain call has 0-d per-column fields).

    Attributes
    ----------
    iterations
        Total number of CG steps run (the most any column ran).
    products
        Number of product calls with ``A``: exactly ``iterations + (1 if x0 given)``.
        Each call multiplies the block of still-running columns.
    matvecs
        Number of columns multiplied with ``A`` over all product calls.
    threshold_iterations
        CG steps each column took before its residual reached ``alpha`` (the
        deterministic part of the estimate, ``l`` in the paper), integer, shape
        ``(k,)``. For a column whose CG converged first it is its total step count.
    roulette_steps
        Steps taken after the threshold ("Russian roulette" continuation) by each
        estimate, integer, shape ``(E, k)``. Column ``c`` ran
        ``threshold_iterations[c] + roulette_steps[:, c].max()`` steps.
    weights
        The cumulative weights ``W_j = ∏_{r=1}^j w_r = exp(β j (j+1)/2)`` applied to
        roulette step ``j = 1, …, J``, float64, shape ``(J,)`` with
        ``J = roulette_steps.max()``. Estimate ``(e, c)`` used the first
        ``roulette_steps[e, c]`` of them; the increments before the threshold have
        weight 1.
    by_roulette
        Whether each estimate was truncated by the roulette (a draw said stop),
        bool, shape ``(E, k)``.
    converged
        Whether CG converged (``‖r‖ ≤ 10·eps·‖b‖``, or a rounding-level breakdown)
        before the roulette stopped the estimate, so that every later increment is
        zero and the series is complete, bool, shape ``(E, k)``. An estimate with
        neither flag was cut by ``maxiter`` and is *biased*.
    residual_norms
        Recursive residual norms ``‖r_i‖`` after each step, shape
        ``(iterations + 1, k)``; row 0 is the initial residual; a stopped column
        repeats its last value.
    variance_estimates
        Unbiased single-run estimate of ``E‖x̃ − A⁻¹b‖²`` (the trace of the
        estimate's covariance, given the deterministic CG path), shape ``(E, k)``;
        see :func:`~pnsolve.randomized.ulisse`, Notes. Heavy-tailed; average it
        over runs.
    cg_iterate
        The plain (unweighted) CG iterate ``x0 + Σ_i α_i p_i`` at truncation, shape of
        ``b``: deterministic given the steps taken and closer to ``A⁻¹b`` than the
        reweighted estimate, hence the warm start for a later, similar system
        (``x0=info.cg_iterate``; the new estimate stays unbiased, whatever ``x0``).
    stop_reason
        ``ZERO_RHS`` (``b = 0``), ``MAX_ITERATIONS`` (some estimate was cut by
        ``maxiter``: biased), ``BREAKDOWN`` (some column hit zero curvature at
        rounding level), ``CONVERGED`` (every estimate ran to CG convergence: no
        roulette truncation happened) or ``TRUNCATED`` (the roulette stopping rule
        truncated at least one estimate: the normal, unbiased outcome).
    """

    matvecs: int
    threshold_iterations: torch.Tensor
    roulette_steps: torch.Tensor
    weights: torch.Tensor
    by_roulette: torch.Tensor
    converged: torch.Tensor
    variance_estimates: torch.Tensor
    cg_iterate: torch.Tensor

    @property
    def unbiased(self) -> bool:
        """Whether every estimate ended by roulette or convergence (none cut by ``maxiter``)."""
        return bool((self.by_roulette | self.converged).all())
