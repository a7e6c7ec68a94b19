"""The belief update: condition the Gaussian belief on ``Sᵀ A x = Sᵀ b``.

With images ``Z = A S`` (the one product per iteration) and the current factors
``Σ_i = Σ₀ − V Vᵀ``:

    C  = Σ₀Z − V (Vᵀ Z)          (Σ_i Z; = S − V(VᵀZ) under the inverse prior)
    AC = AΣ₀Z − AV (Vᵀ Z)        (= Z − AV(VᵀZ) under the inverse prior: no product)
    G  = Zᵀ C = B⁻ᵀB⁻¹            (eigendecomposition; dependent directions dropped)
    V ← [V, C B],  AV ← [AV, AC B],  x ← x + C B Bᵀ Sᵀ r,  r ← r − AC B Bᵀ Sᵀ r

Under the inverse prior ``C`` is the ``A``-conjugated action (``d = s − L Lᵀ A s``),
re-conjugated once more when the first pass cancelled most of it (heavy
cancellation leaves rounding errors of the size of the cancelled part), which
costs no product because ``A C`` is known. Under a general prior the same two passes
run in the ``Σ₀`` inner product on the images (``w = z − W(Vᵀz)``, ``C = Σ₀ w``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..beliefs.columns import ColumnBuffer
from ..beliefs.priors import Prior
from ..errors import NotPositiveDefiniteError
from ..linops.base import LinearOperator

__all__ = ["Conditioner", "NonFiniteObservation", "Update"]


#: Re-conjugate when the first pass leaves less than ``reconjugation_threshold(eps)`` of the
#: action's squared A-norm. One pass leaves an A-conjugacy error of about
#: ``eps · ‖s‖_A / ‖d‖_A``; below ``‖d‖²_A / ‖s‖²_A = √eps`` that error exceeds
#: ``eps^{3/4}`` and a second pass (three more passes over the factors, no product)
#: restores it. The classical "twice is enough" threshold 1/2 fires on most CG
#: iterations (r and its conjugated direction naturally differ in A-norm) at no
#: measured accuracy gain (κ = 1e8 test problem), and costs ~20 % of a matvec at
#: n = 5000, i = 500.
def reconjugation_threshold(eps: float) -> float:
    """Squared A-norm ratio below which the action is conjugated a second time."""
    return math.sqrt(eps)


class NonFiniteObservation(ValueError):
    """The action or its image holds NaN/Inf (seen through the curvature ``zᵀ Σ₀ z``)."""


@dataclass(frozen=True)
class Update:
    """Result of one conditioning step."""

    dx: torch.Tensor  # (n,) mean increment
    dr: torch.Tensor  # (n,) residual decrement
    rank_added: int
    products: int  # extra products with A (0 under the inverse prior)


class Conditioner:
    """Owns the growing factors of one solve (private to a single run).

    Parameters
    ----------
    A
        The system operator.
    prior
        The prior; decides what ``Σ₀ Z`` costs.
    """

    def __init__(self, A: LinearOperator, prior: Prior) -> None:
        n = A.shape[0]
        self.A = A
        self.prior = prior
        self.shares = prior.shares_factors
        new = lambda: ColumnBuffer(n, A.dtype, A.device)  # noqa: E731
        self.V, self.AV = new(), new()
        self.T, self.W = (self.V, self.AV) if self.shares else (new(), new())
        self.eps = torch.finfo(A.dtype).eps
        self.sqrt_n = math.sqrt(n)

    def factors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Views ``(V, T, W)`` for a belief (``T is V`` and ``W is AV`` when shared)."""
        V = self.V.view()
        if self.shares:
            return V, V, self.AV.view()
        return V, self.T.view(), self.W.view()

    def condition(
        self, S: torch.Tensor, Z: torch.Tensor, r: torch.Tensor, iteration: int
    ) -> Update | None:
        """Condition on actions ``S`` with images ``Z = A S`` (both ``(n, m)``).

        Returns ``None`` on breakdown (every new direction dependent on the observed
        ones, or zero). Raises :class:`~pnsolve.NotPositiveDefiniteError` when the
        curvature ``Cᵀ A C`` is clearly negative under the inverse prior.
        """
        SZ, ASZ, extra = self.prior.covariance_of_images(self.A, S, Z)
        # Curvature of the action before any cancellation: sᵀAs (inverse prior) or zᵀΣ₀z.
        prior_curv = torch.linalg.vecdot(Z, SZ, dim=0).abs()
        if not bool(torch.isfinite(prior_curv).all()):
            raise NonFiniteObservation(f"non-finite action or image at iteration {iteration}")
        C, AC, Tn, Wn = SZ, ASZ, S, Z
        if self.V.view().shape[1]:
            scale = prior_curv.sqrt()
            C, AC, Tn, Wn = self._conjugate(Z, C, AC, S, Z, scale)
            after = torch.linalg.vecdot(Wn, C, dim=0).abs()
            if bool((after < reconjugation_threshold(self.eps) * prior_curv).any()):
                C, AC, Tn, Wn = self._conjugate(Wn, C, AC, Tn, Wn, scale)
        elif self.shares:
            Tn, Wn = C, AC
        # G = Wnᵀ C: Cᵀ A C under the inverse prior, zᵀ Σ_i z in general.
        G = Wn.mT @ C
        G = 0.5 * (G + G.mT)
        scale = torch.linalg.vector_norm(Wn, dim=0) * torch.linalg.vector_norm(C, dim=0)
        # Rounding in C is relative to the action *before* the cancellation against V:
        # measure G against the prior curvature too, else a direction already in span(V)
        # keeps its rounding noise as a "new" direction and corrupts the factors.
        scale = torch.maximum(scale, prior_curv)
        # Equilibrate per column (block actions of very different norms, e.g. recycled
        # CG directions, would otherwise lose their small columns to the band), then
        # drop directions whose curvature is at rounding level relative to their own.
        d = torch.where(scale > 0, scale, torch.ones_like(scale)).rsqrt()
        Gs = G * d[:, None] * d[None, :]
        # Each equilibrated entry carries a rounding error of about √n·eps; for a block of
        # m columns (a replayed Krylov buffer, block policies) the error of the Gram
        # matrix's eigenvalues grows to about m·√n·eps (its Frobenius norm).
        band = 10.0 * self.sqrt_n * self.eps * G.shape[0]
        lam, Q = torch.linalg.eigh(Gs) if Gs.shape[0] > 1 else (Gs[0], Gs.new_ones(1, 1))
        if self.shares and float(lam.min()) < -band:
            raise NotPositiveDefiniteError(
                f"A is not positive definite: the action at iteration {iteration} (0-based) "
                f"has negative curvature {float(lam.min()) / float(d.max()) ** 2:.3e}",
                iteration=iteration,
            )
        keep = lam > band
        if not bool(keep.any()):
            return None
        B = d[:, None] * Q[:, keep] * lam[keep].rsqrt()
        Vn, AVn, Tn = C @ B, AC @ B, Tn @ B
        g = Tn.mT @ r
        self.V.append(Vn)
        self.AV.append(AVn)
        if not self.shares:
            self.T.append(Tn)
            self.W.append(Wn @ B)
        return Update(dx=Vn @ g, dr=AVn @ g, rank_added=int(keep.sum()), products=extra)

    def _conjugate(self, Y, C, AC, Tn, Wn, scale):
        """One Gram–Schmidt pass of the new direction against the observed ones.

        With coefficients ``coef = Vᵀ Y`` (``Y = Z`` in the first pass, the conjugated
        images ``Wn`` in the second): ``C ← C − V coef``, ``AC ← AC − AV coef`` and the
        same for the right factor and the images. No product with ``A``.

        The observed directions are orthonormal in the metric of the update, so the
        term ``V_j coef_j`` changes ``C`` by ``|coef_j|`` in that norm; terms below
        ``eps · scale`` (``scale`` = the action's norm in that metric, per column) are
        rounding noise and skipped. For CG's search directions (conjugate in exact
        arithmetic) that leaves a few terms, so the update reads ``V`` once instead of
        three times.
        """
        V, AV = self.V.view(), self.AV.view()
        coef = V.mT @ Y
        rows = (coef.abs() > self.eps * scale).any(dim=1)
        k = int(rows.sum())
        if k == 0:
            return C, AC, Tn, Wn
        if 4 * k < coef.shape[0]:
            idx = rows.nonzero().squeeze(1)
            coef, V, AV = coef[idx], V[:, idx], AV[:, idx]
            T = None if self.shares else self.T.view()[:, idx]
            W = None if self.shares else self.W.view()[:, idx]
        else:
            T = None if self.shares else self.T.view()
            W = None if self.shares else self.W.view()
        C, AC = C - V @ coef, AC - AV @ coef
        if self.shares:
            return C, AC, C, AC
        return C, AC, Tn - T @ coef, Wn - W @ coef
