"""One draw of QSGP's ELBO estimators (Evans & Nair: Theorems 1–3, Propositions 2–3, app. F).

Notation: ``ñ`` sampled rows ``ℓ̃``, ``m̃`` sampled basis functions ``ĩ``, ``j̃``
(independent) and ``r̃`` (diagonal columns of ``C``), ``S = I`` (random Fourier features
carry the outputscale), ``R`` dense columns of ``C``. With ``L = L_μ + L_Σ + L_const``,
``ELBO = −L/2`` (eq. 2) and, for a Gaussian likelihood,

* ``L̂_μ = −(2nm/σ²ñm̃) y_ℓ̃ᵀΦ_ℓ̃ĩ μ_ĩ + (nm²/σ²ñm̃²) μ_j̃ᵀΦ_ℓ̃j̃ᵀΦ_ℓ̃ĩ μ_ĩ + (m/m̃) Σ_ĩ μ_i²``
  (Theorem 1; its ``S`` term sampled over the diagonal of ``S = I``),
* ``L̂_Σ = Σ_{r<R} [(nm²/σ²ñm̃²) c_j̃rᵀΦ_ℓ̃j̃ᵀΦ_ℓ̃ĩ c_ĩr + (m/m̃) Σ_ĩ c_ir² − 2 log c_rr]
  + ((m − R)/m̃) Σ_{r∈r̃} [((n/ñ) Σ_ℓ̃ φ_ℓr²/σ² + 1) c_rr² − 2 log c_rr]`` (Theorem 2 with
  the chevron's sparsity: every dense column, sampled diagonal columns),
* ``L̂_const = n log 2πσ² + (n/σ²ñ) y_ℓ̃ᵀy_ℓ̃ − m`` (Proposition 2, ``log s_ii = 0``),

each unbiased. Control variates (eq. 3, Proposition 3) subtract
``(nm²/σ²n̄m̃²) v_j̃ᵀΦ⁰_pj̃ᵀΦ⁰_pĩ v_ĩ`` and add its expectation ``(n/σ²n̄) ‖a_v‖²`` for
``v = μ`` and every dense column ``c_r``, with ``a_v = Φ⁰_p: v`` on ``n̄`` fixed support
points ``p`` kept up to date by sparse updates and ``Φ⁰`` the basis at initialisation
(appendix F.3); the expectation's gradient is the sparse, rescaled one of appendix F.1.
The linear control variate of appendix F.2 adds ``(2m/σ²m̃) b_ĩᵀμ_ĩ − (2/σ²) bᵀμ`` with
``b = Φ⁰ᵀy``.

For other log-concave likelihoods, Theorem 3's lower bound replaces the data terms:
given the indices, the estimate of ``φ_ℓᵀw`` (``w = μ + Cξ``) is Gaussian in ``ξ`` with mean
``(m/m̃) Φ_ℓĩ μ_ĩ`` and variance ``Σ_{r<R} ((m/m̃) Φ_ℓj̃ c_j̃r)² + ((m−R)/m̃)² Σ_{r∈r̃}
(count_r φ_ℓr c_rr)²``; its expected log-likelihood is a Gauss–Hermite sum, and by
Jensen's inequality its expectation over the indices is at most the exact one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...likelihoods.base import Likelihood
from ...likelihoods.gaussian import Gaussian
from .covariance import VariationalCovariance
from .features import FeatureBlocks
from .sampling import Draw

__all__ = ["ControlVariates", "Estimate", "Leaves", "estimate", "expected_log_lik"]


@dataclass
class ControlVariates:
    """State of the control variates (support points and running products).

    Attributes
    ----------
    support
        ``p``: indices of ``n̄`` training points, shape ``(n̄,)``.
    a
        ``Φ⁰_p: μ``, shape ``(n̄,)``.
    A
        ``Φ⁰_p: C[:, :R]``, shape ``(n̄, R)``.
    basis_dense
        ``Φ⁰_p,:R``, shape ``(n̄, R)`` (updates of ``c_rr`` for ``r`` outside ``u``).
    b, beta
        Appendix F.2: ``b = Φ⁰ᵀy`` (shape ``(m,)``) and ``bᵀμ`` (0-d), or ``None``.
    """

    support: torch.Tensor
    a: torch.Tensor
    A: torch.Tensor
    basis_dense: torch.Tensor
    b: torch.Tensor | None = None
    beta: torch.Tensor | None = None


@dataclass
class Leaves:
    """Leaf copies of the parameters one estimate touches (their ``.grad`` after backward)."""

    mu: torch.Tensor
    lower: torch.Tensor
    log_diag_dense: torch.Tensor
    log_diag_diag: torch.Tensor


@dataclass
class Estimate:
    """An ELBO estimate (differentiable in the leaves and the hyperparameters)."""

    elbo: torch.Tensor
    leaves: Leaves
    basis_u: torch.Tensor | None  # Φ⁰_p,u when control variates are on


def expected_log_lik(
    likelihood: Likelihood,
    y: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    nodes: torch.Tensor,
    weights: torch.Tensor,
) -> torch.Tensor:
    """``E_{z~N(0,1)} log p(y_ℓ | mean_ℓ + z √var_ℓ)`` by Gauss–Hermite, shape ``(n,)``.

    ``nodes``, ``weights``: probabilists' Gauss–Hermite rule (weights summing to one).
    """
    f = mean.unsqueeze(1) + nodes * torch.sqrt(var.clamp_min(0.0)).unsqueeze(1)
    yy = y.unsqueeze(1).expand_as(f)
    ll = likelihood.log_likelihood(f.reshape(-1), yy.reshape(-1)).reshape(f.shape)
    return ll @ weights


def estimate(
    features: FeatureBlocks,
    cov: VariationalCovariance,
    mu: torch.Tensor,
    noise: torch.Tensor,
    likelihood: Likelihood,
    X: torch.Tensor,
    y: torch.Tensor,
    draw: Draw,
    cv: ControlVariates | None,
    quadrature: tuple[torch.Tensor, torch.Tensor],
) -> Estimate:
    """One ELBO estimate (Gaussian: unbiased; otherwise Theorem 3's lower bound).

    ``noise`` is ``σ²`` (0-d, may require grad) and is used only for a Gaussian likelihood.
    """
    n, m, R = X.shape[0], cov.m, cov.R
    nt, mt, rt = draw.n_tilde, draw.m_tilde, draw.r_tilde
    u, li, lj = draw.u, draw.li, draw.lj
    leaves = Leaves(
        mu=mu[u].detach().clone().requires_grad_(True),
        lower=cov.lower[u].detach().clone().requires_grad_(True),
        log_diag_dense=cov.log_diag[:R].detach().clone().requires_grad_(True),
        log_diag_diag=cov.log_diag[draw.diag].detach().clone().requires_grad_(True),
    )
    Xl, yl = X[draw.rows], y[draw.rows]
    Phi = features.block(Xl, u)  # (ñ, |u|), current basis
    Pi, Pj = Phi[:, li], Phi[:, lj]
    mu_i, mu_j = leaves.mu[li], leaves.mu[lj]
    Cu = cov.dense_block(u, leaves.lower, leaves.log_diag_dense) if R else None
    counts = draw.diag_counts.to(X.dtype)
    c_diag = torch.exp(leaves.log_diag_diag)
    Phi_d = features.block(Xl, draw.diag) if draw.diag.numel() else None
    scale_r = (m - R) / rt
    # the KL part, every likelihood: μᵀμ + tr Σ − log|Σ| − m (S = I)
    kl2 = (m / mt) * (mu_i**2).sum() - m - 2 * leaves.log_diag_dense.sum()
    kl2 = kl2 + scale_r * (counts * (c_diag**2 - 2 * leaves.log_diag_diag)).sum()
    if Cu is not None:
        kl2 = kl2 + (m / mt) * (Cu[li] ** 2).sum()
    basis_u = None
    if isinstance(likelihood, Gaussian):
        s2 = noise
        f_i, f_j = Pi @ mu_i, Pj @ mu_j
        L = (
            -(2 * n * m / (nt * mt)) * (yl @ f_i) / s2
            + (n * m * m / (nt * mt * mt)) * (f_j @ f_i) / s2
        )
        if Cu is not None:
            F_i, F_j = Pi @ Cu[li], Pj @ Cu[lj]
            L = L + (n * m * m / (nt * mt * mt)) * (F_j * F_i).sum() / s2
        if Phi_d is not None:
            col_sq = (n / nt) * (Phi_d**2).sum(0)  # estimates of φ_rᵀφ_r
            L = L + scale_r * (counts * col_sq * c_diag**2).sum() / s2
        L = L + n * torch.log(2 * math.pi * s2) + (n / nt) * (yl @ yl) / s2
        if cv is not None:
            basis_u = features.block(X[cv.support], u, frozen=True)  # (n̄, |u|)
            L = L + _control_variates(cv, basis_u, leaves, Cu, u, li, lj, n, m, mt, s2)
        elbo = -0.5 * (L + kl2)
    else:
        nodes, weights = quadrature
        mean = (m / mt) * (Pi @ mu_i)
        var = torch.zeros_like(mean)
        if Cu is not None:
            var = var + (((m / mt) * (Pj @ Cu[lj])) ** 2).sum(-1)
        if Phi_d is not None:
            var = var + (scale_r**2) * ((Phi_d * (counts * c_diag)) ** 2).sum(-1)
        data = (n / nt) * expected_log_lik(likelihood, yl, mean, var, nodes, weights).sum()
        elbo = data - 0.5 * kl2
    return Estimate(elbo, leaves, basis_u)


def _control_variates(
    cv: ControlVariates,
    basis_u: torch.Tensor,
    leaves: Leaves,
    Cu: torch.Tensor | None,
    u: torch.Tensor,
    li: torch.Tensor,
    lj: torch.Tensor,
    n: int,
    m: int,
    mt: int,
    s2: torch.Tensor,
) -> torch.Tensor:
    """Eq. 3 / Proposition 3 for μ and each dense column, F.1 gradients, F.2's linear one."""
    nbar = cv.support.numel()
    coef = n * m * m / (nbar * mt * mt)
    sparse = m / leaves.mu.numel()  # appendix F.1: m / |ĩ ∪ j̃|
    Bi, Bj = basis_u[:, li], basis_u[:, lj]
    mu = leaves.mu
    out = -coef * ((Bj @ mu[lj]) @ (Bi @ mu[li])) / s2
    out = out + (n / nbar) * (cv.a @ cv.a) / s2
    out = out + sparse * (2 * n / nbar) * (cv.a @ (basis_u @ (mu - mu.detach()))) / s2
    if Cu is not None:
        out = out - coef * ((Bj @ Cu[lj]) * (Bi @ Cu[li])).sum() / s2
        out = out + (n / nbar) * (cv.A**2).sum() / s2
        out = out + sparse * (2 * n / nbar) * (cv.A * (basis_u @ (Cu - Cu.detach()))).sum() / s2
    if cv.b is not None and cv.beta is not None:  # appendix F.2, b = Φ⁰ᵀy
        b_u = cv.b[u]
        out = out + (2 * m / mt) * (b_u[li] @ mu[li]) / s2 - 2 * cv.beta / s2
        out = out - sparse * 2 * (b_u @ (mu - mu.detach())) / s2
    return out
