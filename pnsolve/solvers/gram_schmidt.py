"""Gram–Schmidt of new directions against a belief's observed ones (CGS2 and refinement).

The two passes of :class:`~pnsolve.solvers.conditioning.Conditioner` that keep
``Vᵀ A V = I`` to rounding without a product with ``A``: one pass of classical
Gram–Schmidt against the observed directions (:meth:`GramSchmidt._conjugate`, run twice:
"twice is enough") and the refinement of a block of normalised directions
(:meth:`GramSchmidt._refine`, Kahan–Parlett's test).
"""

from __future__ import annotations

import torch

from .._core.columns import ColumnBuffer
from .._core.errors import NotPositiveDefiniteError
from .._core.row_halves import in_two_halves, may_split

__all__ = ["KAHAN_PARLETT_RATIO", "SPLIT_MIN_ELEMENTS", "GramSchmidt"]

#: A normalised direction that keeps less than this fraction of its squared norm when
#: orthogonalised once more is numerically dependent on the observed ones (Parlett,
#: *The Symmetric Eigenvalue Problem*, §6-9: "twice is enough").
KAHAN_PARLETT_RATIO = 0.5

#: Size ``n · i`` of the observed directions from which a pass reads them in two row
#: halves on two threads (:mod:`~pnsolve._core.row_halves`). Measured idle on the 2-core
#: CPU (2026-11-29, ``n = 5 000``, one action, float64): the three reads of a pass took
#: 0.49 ms split against 0.33 ms unsplit at ``i = 150`` (below this size the thread
#: hand-off costs more than it saves) and 0.84 against 1.26 ms at ``i = 290``.
SPLIT_MIN_ELEMENTS = 1_000_000


def _coefficients(V: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """``Vᵀ Y`` (``V`` of shape ``(n, i)``, ``Y`` of shape ``(n, m)``), shape ``(i, m)``."""
    if V.numel() >= SPLIT_MIN_ELEMENTS and may_split(V, Y):
        top, bottom = in_two_halves(lambda rows: V[rows].mT @ Y[rows], V.shape[0])
        return top + bottom
    return V.mT @ Y


def _subtract(pairs: list[tuple[torch.Tensor, torch.Tensor]], coef: torch.Tensor):
    """``[X − F coef for X, F in pairs]`` (``F`` of shape ``(n, i)``, ``X`` ``(n, m)``)."""
    F0 = pairs[0][1]
    if F0.numel() >= SPLIT_MIN_ELEMENTS and may_split(coef, *(t for pair in pairs for t in pair)):
        top, bottom = in_two_halves(
            lambda rows: [X[rows] - F[rows] @ coef for X, F in pairs], F0.shape[0]
        )
        return [torch.cat(halves) for halves in zip(top, bottom, strict=True)]
    return [X - F @ coef for X, F in pairs]


class GramSchmidt:
    """The Gram–Schmidt passes of a conditioner over its factors (a mixin).

    The conditioner owns ``V``, ``AV`` (and, under a general prior, ``T``, ``W``), the
    per-direction error ``weight``, ``eps``, ``sqrt_n`` and ``shares`` (the inverse
    prior: ``T, W`` are ``V, AV``).
    """

    V: ColumnBuffer
    AV: ColumnBuffer
    T: ColumnBuffer
    W: ColumnBuffer
    weight: torch.Tensor
    eps: float
    sqrt_n: float
    shares: bool

    def _curvature_floor(self, C: torch.Tensor, d: torch.Tensor, band: float) -> float:
        """Attainable accuracy of the curvature of ``C diag(d)`` (the conditioner's)."""
        raise NotImplementedError

    def _refine(self, Vn, AVn, Tn, Wn, err, iteration):
        """Orthonormalise the new, already normalised directions a second time.

        A kept direction whose curvature ``λ`` (relative to the action's own) is small
        was mostly cancelled: its rounding error is amplified to about ``eps / √λ``, both
        against the observed directions and within the block (the eigendecomposition's
        error divided by ``√(λ_i λ_j)``). Left alone, these errors compound over later
        iterations until the same direction is added again and ``Vᵀ A V`` drifts far from
        ``I`` (rank above ``n``, a covariance with negative eigenvalues). Directions of
        unit norm are well scaled, so one more Gram–Schmidt pass against ``V`` and an
        eigendecomposition of their Gram matrix ``H`` are accurate to rounding; a
        direction that loses more than half its squared norm in that pass was numerically
        in the span of the others and is dropped (Kahan–Parlett's "twice is enough"
        test). No product with ``A``.

        Returns ``None`` when every direction is dropped. Raises
        :class:`~pnsolve.NotPositiveDefiniteError` under the inverse prior when a
        direction's curvature (from recomputed images) is clearly negative.
        """
        if self.V.view().shape[1]:
            ones = Vn.new_ones(Vn.shape[1])
            Vn, AVn, Tn, Wn, inc = self._conjugate(Wn, Vn, AVn, Tn, Wn, ones)
            err = torch.hypot(err, inc)
        H = Wn.mT @ Vn
        H = 0.5 * (H + H.mT)
        mu, P = torch.linalg.eigh(H)
        band = 10.0 * self.sqrt_n * self.eps * H.shape[0]
        if self.shares and float(mu.min()) < -self._curvature_floor(Vn, Vn.new_ones(1), band):
            raise NotPositiveDefiniteError(
                f"A is not positive definite: the action at iteration {iteration} (0-based) "
                f"has negative curvature (relative {float(mu.min()):.3e} after recomputing "
                "its image)",
                iteration=iteration,
            )
        keep = mu > KAHAN_PARLETT_RATIO
        if not bool(keep.any()):
            return None
        B = P[:, keep] * mu[keep].rsqrt()
        return Vn @ B, AVn @ B, Tn @ B, Wn @ B, torch.linalg.vector_norm(B * err[:, None], dim=0)

    @staticmethod
    def _orthogonal_after_one_pass(
        C: torch.Tensor, Wn: torch.Tensor, prior_curv: torch.Tensor
    ) -> bool:
        """Whether one Gram–Schmidt pass left every column conjugate to rounding.

        Kahan–Parlett ("twice is enough", Parlett §6-9): against directions orthonormal
        to rounding, a vector that keeps more than :data:`KAHAN_PARLETT_RATIO` of its
        squared norm in one pass is orthogonal to them to rounding, so the second pass
        would subtract only rounding. Here the norm is the update's (``Cᵀ A C`` under
        the inverse prior, ``zᵀ Σ_i z`` in general) against the action's before the pass.
        One host read; CG's actions pass it in most iterations, which saves a read of
        ``V`` (about 10 % of a dense product at ``n = 5000``, 250 directions).
        """
        kept = torch.linalg.vecdot(Wn, C, dim=0)
        return bool((kept > KAHAN_PARLETT_RATIO * prior_curv).all())

    def _conjugate(self, Y, C, AC, Tn, Wn, scale, masked: bool = False):
        """One Gram–Schmidt pass of the new direction against the observed ones.

        With coefficients ``coef = Vᵀ Y`` (``Y = Z`` in the first pass, the conjugated
        images ``Wn`` in the second): ``C ← C − V coef``, ``AC ← AC − AV coef`` and the
        same for the right factor and the images. No product with ``A``. Also returns
        the growth of the error bound of ``AC`` (``|coef|ᵀ`` times the observed
        directions' weights), shape ``(m,)``.

        The observed directions are orthonormal in the metric of the update, so the
        term ``V_j coef_j`` changes ``C`` by ``|coef_j|`` in that norm; terms below
        ``eps · scale`` (``scale`` = the action's norm in that metric, per column) are
        rounding noise and skipped. For CG's search directions (conjugate in exact
        arithmetic) that leaves a few terms, so the update reads ``V`` once instead of
        three times. ``masked`` (the device path) zeroes those terms instead of gathering
        the others, so no count is read on the host.
        """
        V, AV = self.V.view(), self.AV.view()
        coef = _coefficients(V, Y)
        rows = (coef.abs() > self.eps * scale).any(dim=1)
        weight = self.weight
        if masked:  # the device path: the same terms, without reading k on the host
            coef = torch.where(rows[:, None], coef, 0.0)
            k = coef.shape[0]
        else:
            k = int(rows.sum())
            if k == 0:
                return C, AC, Tn, Wn, torch.zeros_like(scale)
        if 4 * k < coef.shape[0]:
            idx = rows.nonzero().squeeze(1)
            coef, V, AV, weight = coef[idx], V[:, idx], AV[:, idx], weight[idx]
        inc = torch.linalg.vector_norm(coef * weight[:, None], dim=0)
        if self.shares:
            C, AC = _subtract([(C, V), (AC, AV)], coef)
            return C, AC, C, AC, inc
        T, W = self.T.view(), self.W.view()
        if 4 * k < T.shape[1]:
            T, W = T[:, idx], W[:, idx]
        C, AC, Tn, Wn = _subtract([(C, V), (AC, AV), (Tn, T), (Wn, W)], coef)
        return C, AC, Tn, Wn, inc
