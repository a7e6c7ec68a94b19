"""Calibration check of a solution belief: whitened errors of solutions drawn from the prior.

If ``x* ~ N(x₀, Σ₀)``, ``b = A x*`` and the policy's actions do not depend on ``b``,
the posterior after ``i`` iterations is exact Gaussian conditioning, so the error
``e = x* − x_i`` satisfies ``eᵀ Σ_i⁺ e ~ χ²(rank Σ_i)``. Averaging the statistic over
many draws and comparing with its expectation (the rank) tests calibration: the
z-score of the mean is ``(mean − r) / √(2r / draws)``.

Dense linear algebra throughout (``Σ_i = Σ₀ − V Vᵀ`` with a dense ``Σ₀`` from an
eigendecomposition of ``A``, equal to ``belief.cov.to_dense()`` without its inner
solves): for tests, benchmarks and teaching at small ``n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..linops.base import LinearOperator
from ..policies.base import Policy
from ..stopping.criteria import MaxIterations
from .tolerances import krylov_tol

__all__ = ["CalibrationResult", "whitened_error_statistics"]


@dataclass(frozen=True)
class CalibrationResult:
    """Whitened squared errors ``eᵀ Σ_i⁺ e`` of ``draws`` solves.

    Attributes
    ----------
    statistics
        One value per draw, shape ``(draws,)``.
    rank
        ``rank Σ_i`` (the same for every draw): the expected value under calibration.
    """

    statistics: torch.Tensor
    rank: int

    @property
    def mean(self) -> float:
        """Average statistic."""
        return float(self.statistics.mean())

    @property
    def ratio(self) -> float:
        """Average statistic over its expectation (1 when calibrated)."""
        return self.mean / self.rank

    @property
    def z(self) -> float:
        """z-score of the mean under ``χ²(rank)``: ``(mean − r) / √(2r / draws)``."""
        draws = self.statistics.numel()
        return (self.mean - self.rank) / math.sqrt(2 * self.rank / draws)


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
        Iterations per solve, ``< n`` (so that ``Σ_i ≠ 0``).
    draws
        Number of solutions drawn.
    generator
        Draws ``x*`` and the policy's randomness.
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
    cond = float(lam.max() / lam.min())
    stats, ranks = [], set()
    for _ in range(draws):
        z = torch.randn(n, generator=generator, dtype=Ad.dtype, device=Ad.device)
        x_true = root @ z
        belief, _ = solver.solve(A, A @ x_true, generator=generator)
        cov = prior_cov - belief.V @ belief.V.mT  # = belief.cov.to_dense(), no inner solves
        mu, U = torch.linalg.eigh(0.5 * (cov + cov.mT))
        keep = mu > krylov_tol(Ad.dtype, cond) * float(mu.max())
        w = U[:, keep].mT @ (x_true - belief.mean)
        stats.append(float((w * w / mu[keep]).sum()))
        ranks.add(int(keep.sum()))
    if len(ranks) != 1:
        raise ValueError(f"rank of Σ_i varied between draws: {sorted(ranks)}")
    return CalibrationResult(torch.tensor(stats, dtype=torch.float64), ranks.pop())
