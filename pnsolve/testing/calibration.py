"""Calibration check of a solution belief: whitened errors of solutions drawn from the prior.

If ``x* ~ N(x₀, Σ₀)``, ``b = A x*`` and the policy's actions do not depend on ``b``,
the posterior after ``i`` iterations is exact Gaussian conditioning, so the error
``e = x* − x_i`` satisfies ``eᵀ Σ_i⁺ e ~ χ²(rank Σ_i)`` with ``rank Σ_i = n − i`` for
``i`` independent actions (the known rank, never guessed from thresholded
eigenvalues). Summing the statistic over many draws and comparing with its
expectation tests calibration: the z-score is ``(Σ s − Σ r) / √(2 Σ r)``.

Dense linear algebra throughout (``Σ_i = Σ₀ − V Vᵀ`` with a dense ``Σ₀`` from an
eigendecomposition of ``A``, equal to ``belief.cov.to_dense()`` without its inner
solves): for tests, benchmarks and teaching at small ``n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._core import random as rnd
from ..linops.base import LinearOperator
from ..metrics.calibration import CalibrationStatistics
from ..policies.base import Policy
from ..stopping.criteria import MaxIterations

__all__ = ["CalibrationResult", "assert_calibrated", "whitened_error_statistics"]


@dataclass(frozen=True)
class CalibrationResult:
    """Whitened squared errors ``eᵀ Σ_i⁺ e`` of ``draws`` solves.

    Attributes
    ----------
    statistics
        One value per draw, shape ``(draws,)``: ``χ²(r_d)`` under calibration.
    ranks
        ``r_d = rank Σ_i = n − rank C_i`` per draw, shape ``(draws,)`` (int64): the
        known rank (each independent action removes one dimension), not a count of
        eigenvalues above a threshold.
    null_error
        Largest error outside ``range Σ_i`` over the draws, relative to ``‖x*‖``: the
        belief claims certainty there, so a calibrated solver leaves only rounding
        (this is the whole check once the solver has converged, ``r_d = 0``).
    """

    statistics: torch.Tensor
    ranks: torch.Tensor
    null_error: float

    @property
    def rank(self) -> int:
        """The common ``rank Σ_i`` of the draws (``ValueError`` if it varied: see :attr:`ranks`)."""
        values = torch.unique(self.ranks)
        if values.numel() != 1:
            raise ValueError(f"rank Σ_i varied between draws: {values.tolist()}; use ranks")
        return int(values[0])

    @property
    def mean(self) -> float:
        """Average statistic."""
        return float(self.statistics.mean())

    @property
    def ratio(self) -> float:
        """Summed statistic over its expectation ``Σ r_d`` (1 if calibrated or ``Σ r_d = 0``)."""
        dof = int(self.ranks.sum())
        return float(self.statistics.sum()) / dof if dof else 1.0

    @property
    def z(self) -> float:
        """z-score of the summed statistic under ``χ²(Σ r_d)``: ``(Σ s − Σ r) / √(2 Σ r)``.

        ``0`` when ``Σ r_d = 0`` (no degrees of freedom left: see :attr:`null_error`).
        """
        dof = int(self.ranks.sum())
        return (float(self.statistics.sum()) - dof) / math.sqrt(2 * dof) if dof else 0.0


def whitened_error_statistics(
    A: LinearOperator,
    policy: Policy,
    prior: str | float,
    iterations: int,
    draws: int,
    generator: torch.Generator,
) -> CalibrationResult:
    """Draw ``x* ~ N(0, Σ₀)``, solve ``A x = A x*`` for ``iterations`` steps, whiten the error.

    Parameters
    ----------
    A
        SPD operator, small ``n`` (it is densified).
    policy
        The policy under test.
    prior
        ``"inverse"`` (``x* ~ N(0, A⁻¹)``) or ``σ²`` (``x* ~ N(0, σ² I)``).
    iterations
        Iteration budget per solve (a solve may stop earlier, e.g. when CG has
        converged; ``iterations ≥ n`` is allowed and leaves ``Σ_i = 0``).
    draws
        Number of solutions drawn.
    generator
        Draws ``x*`` and the policy's randomness.

    Returns
    -------
    CalibrationResult
        The statistic ``eᵀ Σ_i⁺ e`` over the ``r = n − rank C_i`` directions the
        belief is uncertain about (the top ``r`` eigenvectors of ``Σ_i``), and the
        error along the others.

    Raises
    ------
    ValueError
        If one of the top ``r`` eigenvalues of ``Σ_i`` is not positive (the belief
        itself is invalid).
    """
    from ..solvers.solver import ProbabilisticLinearSolver

    Ad = A.to_dense()
    n = Ad.shape[0]
    lam, Q = torch.linalg.eigh(Ad)
    if prior == "inverse":
        root = Q * lam.rsqrt()  # (A⁻¹)^{1/2} up to an orthogonal factor
    else:
        root = math.sqrt(float(prior)) * torch.eye(n, dtype=Ad.dtype, device=Ad.device)
    prior_cov = root @ root.mT
    solver = ProbabilisticLinearSolver(policy, MaxIterations(iterations), prior=prior)
    stats, ranks, null = [], [], 0.0
    for _ in range(draws):
        z = rnd.randn(n, generator=generator, dtype=Ad.dtype, device=Ad.device)
        x_true = root @ z
        belief, _ = solver.solve(A, A @ x_true, generator=generator)
        r = n - belief.rank
        cov = prior_cov - belief.V @ belief.V.mT  # = belief.cov.to_dense(), no inner solves
        mu, U = torch.linalg.eigh(0.5 * (cov + cov.mT))  # ascending
        e = x_true - belief.mean
        top, rest = U[:, n - r :], U[:, : n - r]
        if r and float(mu[n - r]) <= 0:
            raise ValueError(
                f"Σ_i has a non-positive eigenvalue {float(mu[n - r]):.3e} among its top "
                f"r = {r}: the belief is not a valid Gaussian"
            )
        w = top.mT @ e
        stats.append(float((w * w / mu[n - r :]).sum()))
        ranks.append(r)
        null = max(
            null, float(torch.linalg.vector_norm(rest.mT @ e) / torch.linalg.vector_norm(x_true))
        )
    return CalibrationResult(
        torch.tensor(stats, dtype=torch.float64), torch.tensor(ranks, dtype=torch.int64), null
    )


def assert_calibrated(stats: CalibrationStatistics, z: float, level: float = 0.95) -> None:
    """Assert ``E[z²] = 1`` and coverage ``= level`` within ``z`` standard errors each.

    Parameters
    ----------
    stats
        GP-level statistics, e.g. one entry of
        :func:`~pnsolve.metrics.prior_draw_calibration`.
    z
        Threshold in standard errors, from
        :func:`~pnsolve.testing.statistical_threshold` at the stated false-alarm level
        (two checks per call).
    level
        The nominal coverage level checked (one of ``stats.levels``).

    Raises
    ------
    AssertionError
        Naming the statistic, its value, its standard error and the threshold.
    """
    dev = abs(stats.mean_z2 - 1.0)
    assert dev <= z * stats.mean_z2_se, (
        f"E[z²] = {stats.mean_z2:.4g} ± {stats.mean_z2_se:.2g} is {dev:.3g} from 1, more "
        f"than {z:.3g} standard errors"
    )
    coverage, se = stats.coverage_at(level)
    assert abs(coverage - level) <= z * se, (
        f"coverage of the {level:g} interval = {coverage:.4f} ± {se:.2g}, more than {z:.3g} "
        f"standard errors from {level:g}"
    )
