"""ULISSE is unbiased: z-tests over many independent draws on a system where CG ends early.

Problem: ``A`` of size 50 with 8 distinct eigenvalues (``pn.problems.clustered``), so
CG converges in 8 genuine steps (11 to reach ``10·eps·‖b‖``) and every moment of the
estimate is finite. ``N = 4000`` independent draws are run at once as the columns of
``b`` repeated (each column has its own roulette), with two estimates per column, from
one fixed generator seed.

Each test function is one family of z-scores ``z = (mean − truth) / (sd/√N)``, at a
family-wise false-alarm level of ``1e-3`` (Bonferroni over the family) for each of
the two (alpha, beta) settings. Power checks assert that the same machinery flags
estimators that *are* biased (the plug-in quadratic form, the unweighted CG iterate
at truncation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

import pnsolve as pn
from pnsolve.randomized._ulisse_core import ulisse_trace
from pnsolve.testing import statistical_threshold

F64 = torch.float64
N_DRAWS = 4000
FALSE_ALARM = 1e-3
N = 50


@dataclass(frozen=True)
class Draws:
    x: torch.Tensor  # (2, n, N): two estimates per draw
    info: pn.randomized.UlisseInfo
    truth: torch.Tensor  # (n,)
    problem: pn.problems.LinearSystem
    alpha: float
    beta: float


def _z(samples: torch.Tensor, truth: torch.Tensor | float) -> torch.Tensor:
    """z-scores of the sample mean along the last dimension."""
    n = samples.shape[-1]
    return (samples.mean(-1) - truth) / (samples.std(-1) / math.sqrt(n))


@pytest.fixture(scope="module", params=[(0.1, 0.2), (0.3, 0.1)], ids=["a0.1-b0.2", "a0.3-b0.1"])
def draws(request) -> Draws:
    q, beta = request.param
    pr = pn.problems.clustered(N, clusters=8, generator=torch.Generator().manual_seed(0))
    alpha = q * float(pr.b.norm())
    B = pr.b[:, None].expand(N, N_DRAWS).contiguous()
    g = torch.Generator().manual_seed(2024)
    x, info = pn.randomized.ulisse(pr.A, B, alpha=alpha, beta=beta, generator=g, num_estimates=2)
    assert info.unbiased and info.stop_reason is pn.StopReason.TRUNCATED
    return Draws(x, info, pr.x_true, pr, alpha, beta)


def _directions() -> torch.Tensor:
    """Six fixed unit directions: e_0, the all-ones direction and four Gaussian ones."""
    D = torch.randn(N, 6, generator=torch.Generator().manual_seed(11), dtype=F64)
    D[:, 0] = 0.0
    D[0, 0] = 1.0
    D[:, 1] = 1.0
    return D / D.norm(dim=0)


@pytest.mark.statistical
def test_mean_is_unbiased(draws: Draws):
    D = _directions()
    z = torch.cat([_z(D.T @ draws.x[e], D.T @ draws.truth) for e in range(2)])  # 12 z-scores
    threshold = statistical_threshold(FALSE_ALARM / z.numel())
    assert float(z.abs().max()) <= threshold, z


@pytest.mark.statistical
def test_quadratic_forms_from_two_estimates_are_unbiased(draws: Draws):
    x1, x2, xs = draws.x[0], draws.x[1], draws.truth
    S = torch.randn(N, N, generator=torch.Generator().manual_seed(12), dtype=F64)
    S = S + S.T  # a fixed symmetric matrix, like ∂K in a GP gradient
    y = torch.randn(N, generator=torch.Generator().manual_seed(13), dtype=F64)
    samples = torch.stack([(x1 * x2).sum(0), (x1 * (S @ x2)).sum(0), (y @ x1) * (y @ x2)])
    truth = torch.stack([xs @ xs, xs @ S @ xs, (y @ xs) ** 2])
    z = _z(samples, truth)
    assert float(z.abs().max()) <= statistical_threshold(FALSE_ALARM / 3), z


@pytest.mark.statistical
def test_power_biased_estimators_are_detected(draws: Draws):
    """The same z-test flags the plug-in ``x̃ᵀx̃`` and the unweighted truncated CG iterate."""
    x1, xs = draws.x[0], draws.truth
    threshold = statistical_threshold(FALSE_ALARM)
    assert float(_z((x1 * x1).sum(0), xs @ xs)) > threshold  # biased up by tr Cov
    pr = draws.problem
    B = pr.b[:, None].expand(N, N_DRAWS).contiguous()
    trace = ulisse_trace(
        pr.A, B, None, alpha=draws.alpha, beta=draws.beta,
        generator=torch.Generator().manual_seed(7), maxiter=10 * N,
    )  # fmt: skip
    z = _z(_directions().T @ trace.iterate, _directions().T @ xs)
    assert float(z.abs().max()) > statistical_threshold(FALSE_ALARM / 6)


def _cg_error_norms(pr: pn.problems.LinearSystem, steps: int) -> torch.Tensor:
    errors = [float(pr.x_true.norm())]
    pn.cg(pr.A, pr.b, rtol=0.0, atol=0.0, maxiter=steps,
          callback=lambda x: errors.append(float((pr.x_true - x).norm())))  # fmt: skip
    return torch.tensor(errors, dtype=F64)


@pytest.mark.statistical
def test_variance_estimate_and_closed_form_agree_with_sample(draws: Draws):
    """One-run estimates ``v̂`` and ``ulisse_variance`` match ``E‖x̃ − x*‖²``."""
    err2 = (draws.x - draws.truth[:, None]).square().sum(1)  # (2, N) squared errors
    steps = int(draws.info.threshold_iterations[0] + draws.info.roulette_steps.max()) + 3
    exact = pn.randomized.ulisse_variance(
        _cg_error_norms(draws.problem, steps), int(draws.info.threshold_iterations[0]), draws.beta
    )
    z = torch.cat([_z(draws.info.variance_estimates - err2, 0.0), _z(err2, exact)])
    assert float(z.abs().max()) <= statistical_threshold(FALSE_ALARM / 4), z


@pytest.mark.statistical
def test_roulette_step_counts_follow_the_weights(draws: Draws):
    """``P(J ≥ j) = 1/W_j = exp(−β j(j+1)/2)``, capped where CG converges."""
    pr, beta = draws.problem, draws.beta
    _, ref = pn.randomized.ulisse(
        pr.A, pr.b, alpha=0.0, beta=1.0, generator=torch.Generator().manual_seed(0)
    )
    l = draws.info.threshold_iterations
    assert bool((l == l[0]).all())
    j_max = ref.iterations - int(l[0])
    expected = math.fsum(math.exp(-beta * j * (j + 1) / 2) for j in range(1, j_max + 1))
    J = draws.info.roulette_steps.to(F64)  # (2, N)
    z = _z(J, expected)
    assert float(z.abs().max()) <= statistical_threshold(FALSE_ALARM / 2), z
    # The two estimates' truncation points are independent draws.
    corr = torch.corrcoef(J)[0, 1]
    assert abs(float(corr)) * math.sqrt(N_DRAWS) <= statistical_threshold(FALSE_ALARM)
