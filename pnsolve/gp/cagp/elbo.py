r"""The computation-aware ELBO (Wenger et al. 2024) from ``KS`` and ``i × i`` algebra.

**Derivation.** With actions ``S`` ``(n, i)`` of full column rank, CaGP's posterior over
the training function values is the GP posterior given the projected data
``z = Sᵀy = Sᵀf + Sᵀε``, ``Sᵀε ~ N(0, σ² SᵀS)``:
``q(f) = N(m, Σ)``, ``m = μ + K S v``, ``Σ = K − K S Ĝ⁻¹ Sᵀ K``, with ``G = SᵀKS``,
``Ĝ = G + σ² SᵀS = SᵀK̂S`` and ``v = Ĝ⁻¹ Sᵀ(y − μ)``. The ELBO
``E_q log p(y | f) − KL(q ‖ p)`` is, term by term:

* ``E_q log p(y | f) = −½ [n log 2πσ² + (‖y − m‖² + tr Σ) / σ²]`` with
  ``tr Σ = tr K − tr(Ĝ⁻¹ SᵀK²S)``;
* ``KL = ½ [tr(K⁻¹Σ) + (m − μ)ᵀK⁻¹(m − μ) − n + log |K| − log |Σ|]`` where
  ``tr(K⁻¹Σ) = n − tr(Ĝ⁻¹G)``, ``(m − μ)ᵀK⁻¹(m − μ) = vᵀGv`` and, by Sylvester's
  determinant identity, ``log |K| − log |Σ| = −log |I − Ĝ⁻¹G| = log |Ĝ| − log |σ² SᵀS|``;
  so ``KL = ½ [vᵀGv + log |Ĝ| − i log σ² − log |SᵀS| − tr(Ĝ⁻¹G)]``.

For block-sparse actions ``SᵀS`` is diagonal and ``log |SᵀS| = Σ_j log ‖s_j‖²``, the
formula GPyTorch's ``computation-aware-gps-v3`` branch computes; the derivation above
holds for any ``S`` of full column rank (e.g. a policy's dense actions). With ``i = n``
and ``S = I`` the ELBO is the exact log marginal likelihood (``q`` is the exact
posterior); for any ``S`` it is at most that (the KL of ``q`` to the exact posterior is
the gap). Everything after ``KS`` is ``O(n i² + i³)`` and runs in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["ActionsNotFullRankError", "CaGPFactors", "computation_aware_elbo"]


class ActionsNotFullRankError(ValueError, ArithmeticError):
    """``Ĝ = SᵀK̂S`` is not positive definite: the actions are (numerically) rank deficient."""


@dataclass(frozen=True)
class CaGPFactors:
    """What prediction needs from a CaGP fit (float64).

    Attributes
    ----------
    L
        Lower Cholesky factor of ``Ĝ = SᵀK̂S``, shape ``(i, i)``.
    v
        ``Ĝ⁻¹ Sᵀ(y − μ)``, shape ``(i,)``.
    """

    L: torch.Tensor
    v: torch.Tensor


def _symmetric(M: torch.Tensor) -> torch.Tensor:
    return 0.5 * (M + M.mT)


def computation_aware_elbo(
    KS: torch.Tensor,
    StKS: torch.Tensor,
    Sty: torch.Tensor,
    gram: torch.Tensor,
    log_det_gram: torch.Tensor,
    y_centred: torch.Tensor,
    noise: torch.Tensor,
    trace_K: torch.Tensor,
) -> tuple[torch.Tensor, CaGPFactors]:
    """The total ELBO (0-d, float64, differentiable) and the prediction factors.

    Parameters
    ----------
    KS
        ``K S``, shape ``(n, i)``.
    StKS
        ``Sᵀ K S``, shape ``(i, i)`` (symmetrised here).
    Sty
        ``Sᵀ (y − μ)``, shape ``(i,)``.
    gram, log_det_gram
        ``SᵀS`` ``(i, i)`` and ``log |SᵀS|`` (0-d).
    y_centred
        ``y − μ``, shape ``(n,)``.
    noise
        ``σ² > 0``, 0-d.
    trace_K
        ``tr K = Σ_j k(x_j, x_j)``, 0-d.

    Returns
    -------
    elbo : torch.Tensor
        On the scale of the exact log marginal likelihood (a sum over the ``n`` points).
    factors : CaGPFactors
        ``L`` and ``v`` (detached).

    Raises
    ------
    ActionsNotFullRankError
        If ``Ĝ`` has no Cholesky factor (rank-deficient actions, e.g. a block whose
        entries are all zero).
    """
    f64 = torch.float64
    n, i = KS.shape
    KS, y = KS.to(f64), y_centred.to(f64)
    s2 = noise.to(f64)
    G = _symmetric(StKS.to(f64))
    G_hat = G + s2 * gram.to(f64)
    L, bad = torch.linalg.cholesky_ex(G_hat)
    if int(bad) != 0:
        raise ActionsNotFullRankError(
            f"SᵀK̂S (i = {i}) is not positive definite (leading minor {int(bad)}): the "
            "actions are rank deficient (an all-zero block, or dependent columns); "
            "re-initialise them or use fewer actions"
        )
    v = torch.cholesky_solve(Sty.to(f64).unsqueeze(1), L).squeeze(1)
    residual = y - KS @ v
    M = KS.mT @ KS  # SᵀK²S
    trace_reduction = torch.cholesky_solve(M, L).diagonal().sum()
    trace_G = torch.cholesky_solve(G, L).diagonal().sum()
    log_s2 = torch.log(s2)
    ell = -0.5 * (
        n * (math.log(2 * math.pi) + log_s2)
        + (residual @ residual + trace_K.to(f64) - trace_reduction) / s2
    )
    kl = 0.5 * (
        v @ (G @ v) + 2 * torch.log(L.diagonal()).sum() - i * log_s2 - log_det_gram.to(f64)
        - trace_G
    )  # fmt: skip
    return ell - kl, CaGPFactors(L.detach(), v.detach())
