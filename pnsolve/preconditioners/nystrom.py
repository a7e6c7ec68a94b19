"""The randomized Nyström preconditioner (Frangella, Tropp & Udell, 2023)."""

from __future__ import annotations

import math

import torch

from .._core import random as rnd
from .._core.precision import full_float32
from .._core.validation import check_generator
from ..linops.base import LinearOperator
from ..linops.low_rank import LowRank
from ._common import as_spd_operator, check_rank

__all__ = ["Nystrom"]


class Nystrom(LinearOperator):
    """Randomized Nyström preconditioner for ``A + μI``; products apply ``P⁻¹``.

    A Gaussian sketch ``Ω`` (orthonormalised) and **one** block product ``Y = A Ω``
    give the Nyström approximation ``Â = U Λ Uᵀ ≈ A`` (stabilised with the shift
    ``ν = √n·eps·‖Y‖₂``). The preconditioner is

    ``P = (λ_r + μ)⁻¹ U (Λ + μI) Uᵀ + (I − U Uᵀ)``,
    ``P⁻¹ = (λ_r + μ) U (Λ + μI)⁻¹ Uᵀ + (I − U Uᵀ)``,

    with ``λ_r`` the smallest kept eigenvalue: along ``U`` the system is rescaled
    by its approximate eigenvalues, the rest of the spectrum is left alone.

    Parameters
    ----------
    A
        Symmetric positive semi-definite operator, shape ``(n, n)``.
    rank
        Sketch size ``r ≥ 1``; capped at ``n`` (then the approximation is exact).
    generator
        The ``torch.Generator`` that draws the sketch (on any device: drawn there, moved to
        ``A``'s).
    mu
        Regularisation ``μ ≥ 0``: ``P`` approximates ``A + μI``. For a kernel
        system ``K̂ = K + σ²I`` use ``Nystrom(K, r, generator=g, mu=σ²)`` (the
        recommended form) or ``Nystrom(K̂, r, generator=g)``. With ``μ = 0``,
        eigenvalues below ``√n·eps·λ_1`` are dropped so that ``P⁻¹`` stays bounded.

    Attributes
    ----------
    U
        Orthonormal eigenvectors of ``Â``, shape ``(n, r')`` with ``r' ≤ r``.
    eigenvalues
        Eigenvalues of ``Â`` in descending order, shape ``(r',)``.
    mu, shift
        ``μ`` and the stabilising shift ``ν``.
    """

    @full_float32
    def __init__(
        self, A: object, rank: int, *, generator: torch.Generator, mu: float = 0.0
    ) -> None:
        A = as_spd_operator(A)
        n = A.shape[0]
        rank = check_rank(rank, n)
        if generator is None or check_generator(generator) is None:
            raise TypeError("generator must be a torch.Generator (randomness is explicit)")
        mu = float(mu)
        if not (math.isfinite(mu) and mu >= 0):
            raise ValueError(f"mu must be finite and non-negative, got {mu}")
        super().__init__(A.shape, A.dtype, A.device, is_symmetric=True, is_psd=True)
        eps = torch.finfo(A.dtype).eps
        with torch.no_grad():
            Omega = rnd.randn((n, rank), generator=generator, dtype=A.dtype, device=A.device)
            Omega = torch.linalg.qr(Omega).Q
            Y = A.matmat(Omega)
            nu = math.sqrt(n) * eps * float(torch.linalg.matrix_norm(Y, ord=2))
            U, lam = _nystrom_eig(Omega, Y, nu)
            if mu == 0:
                keep = lam > math.sqrt(n) * eps * float(lam.max().clamp(min=0))
                if not bool(keep.any()):
                    raise ValueError("A @ Ω vanished: A looks like the zero operator")
                U, lam = U[:, keep], lam[keep]
        self.U, self.eigenvalues, self.mu, self.shift = U, lam, mu, nu
        self._scale = (lam[-1] + mu) / (lam + mu) - 1.0  # P⁻¹ = I + U diag(scale) Uᵀ

    @property
    def rank(self) -> int:
        """Number of kept eigenpairs ``r'``."""
        return self.U.shape[1]

    def approximation(self) -> LowRank:
        """The Nyström approximation ``Â = U Λ Uᵀ`` as a :class:`LowRank` operator."""
        return LowRank(self.U * self.eigenvalues.sqrt())

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return X + self.U @ (self._scale.unsqueeze(-1) * (self.U.mT @ X))

    def _diagonal(self) -> torch.Tensor:
        return 1.0 + (self.U * self.U) @ self._scale

    def logdet(self) -> torch.Tensor:
        """``log det P = Σ log((λ_i + μ)/(λ_r + μ))`` (0-d tensor)."""
        lam = self.eigenvalues
        return torch.log((lam + self.mu) / (lam[-1] + self.mu)).sum()


def _nystrom_eig(Omega: torch.Tensor, Y: torch.Tensor, nu: float):
    """Eigenpairs of the shifted Nyström approximation (Tropp et al., Alg. 3)."""
    for _ in range(4):
        Y_nu = Y + nu * Omega
        core = Omega.mT @ Y_nu
        C, info = torch.linalg.cholesky_ex(0.5 * (core + core.mT))
        if int(info) == 0:
            break
        nu = max(10 * nu, torch.finfo(Y.dtype).eps)
    else:
        raise ValueError("the Nyström core Ωᵀ A Ω is not positive definite: is A PSD?")
    B = torch.linalg.solve_triangular(C, Y_nu.mT, upper=False).mT  # Y_ν C⁻ᵀ
    U, S, _ = torch.linalg.svd(B, full_matrices=False)
    return U, (S * S - nu).clamp(min=0)
