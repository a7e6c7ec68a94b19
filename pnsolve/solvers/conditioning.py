"""The belief update: condition the Gaussian belief on ``Sᵀ A x = Sᵀ b``.

With images ``Z = A S`` (the one product per iteration) and the current factors
``Σ_i = Σ₀ − V Vᵀ``:

    C  = Σ₀Z − V (Vᵀ Z)          (Σ_i Z; = S − V(VᵀZ) under the inverse prior)
    AC = AΣ₀Z − AV (Vᵀ Z)        (= Z − AV(VᵀZ) under the inverse prior: no product)
    G  = Zᵀ C = B⁻ᵀB⁻¹            (eigendecomposition; dependent directions dropped)
    V ← [V, C B],  AV ← [AV, AC B],  x ← x + C B Bᵀ Sᵀ r,  r ← r − AC B Bᵀ Sᵀ r

Under the inverse prior ``C`` is the ``A``-conjugated action (``d = s − L Lᵀ A s``).
Keeping ``Vᵀ A V = I`` to rounding in floating point takes three safeguards; only the
second ever spends a product, and only on degenerate actions (a stalled residual past
convergence, near-dependent custom actions), never on ordinary Krylov steps:

1. **Two Gram–Schmidt passes** ("twice is enough", CGS2). One pass against a ``V``
   orthonormal only to ``δ`` leaves an error ``δ ‖Vᵀ z‖ / ‖C‖_A``, which compounds once
   Ritz values converge (Paige); the second pass (one read of ``V``) updates only with
   rows above rounding level, and is skipped where the first kept more than half the
   action's squared norm (Kahan–Parlett: it would remove only rounding).
2. **Image accuracy.** ``AC = z − AV (Vᵀ z)`` loses accuracy to cancellation; a
   first-order estimate of each stored image's error is kept, and when it exceeds
   :func:`image_tolerance` while a fresh product would be clearly better, the images
   of the new directions are recomputed with one product (counted in ``products``).
3. **Refinement** of blocks (replayed Krylov buffers, block policies) and of
   recomputed images: a second orthonormalisation of the normalised directions,
   dropping those that lose more than half their squared norm (Kahan–Parlett).

Under a general prior the same passes run in the ``Σ₀`` inner product on the images
(``w = z − W(Vᵀz)``, ``C = Σ₀ w``); images are never recomputed there.
"""

from __future__ import annotations

import math

import torch

from .._core.columns import ColumnBuffer
from .._core.precision import full_float32
from ..beliefs.priors import Prior
from ..krylov.mixed_precision import product_eps
from ..linops.base import LinearOperator
from .curvature import (
    curvature_floor,
    equilibrated_curvature,
    norm_estimate,
    not_positive_definite,
)
from .gram_schmidt import KAHAN_PARLETT_RATIO, GramSchmidt
from .single_action import SingleAction
from .update import REDO_GAIN, Block, NonFiniteObservation, Update, image_tolerance

__all__ = ["KAHAN_PARLETT_RATIO", "Conditioner", "NonFiniteObservation", "Update"]


class Conditioner(GramSchmidt, SingleAction):
    """Owns the growing factors of one solve (private to a single run).

    Besides the factors it keeps, per observed direction, a first-order bound on the
    absolute error of its stored image ``A v`` (the images are formed recursively and
    are never recomputed unless that bound exceeds :func:`image_tolerance`).

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
        self.eps = product_eps(A)  # float32's where the products are (mixed precision)
        self.sqrt_n = math.sqrt(n)
        # Per observed direction: a first-order estimate of ‖A v − stored image‖ in units
        # of eps·‖A‖ (a length, like ‖v‖): what one unit of its coefficient adds to the
        # error of a recursive image. Every rounding term is proportional to eps·‖A‖, so
        # the estimates stay valid when the estimate of ‖A‖ below grows.
        self.weight = torch.zeros(0, dtype=A.dtype, device=A.device)
        # grown by every observed ‖A s‖ / ‖s‖ (0-d tensor: updated without a host read)
        self.norm_A = torch.tensor(norm_estimate(A), dtype=A.dtype, device=A.device)
        # Off the CPU a host read stalls the device: single actions then take the
        # device path (decisions read together, once per update; see `_condition_one`).
        self.device_path = self._device_path(A)

    @staticmethod
    def _device_path(A: LinearOperator) -> bool:
        """Whether single actions are conditioned with one host read (off the CPU)."""
        return A.device.type != "cpu"

    def factors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Views ``(V, T, W)`` for a belief (``T is V`` and ``W is AV`` when shared)."""
        V = self.V.view()
        if self.shares:
            return V, V, self.AV.view()
        return V, self.T.view(), self.W.view()

    @full_float32
    def condition(
        self,
        S: torch.Tensor,
        Z: torch.Tensor,
        r: torch.Tensor,
        iteration: int,
        allow_products: bool = True,
    ) -> Update | None:
        """Condition on actions ``S`` with images ``Z = A S`` (both ``(n, m)``).

        Returns an :class:`Update` with ``rank_added = 0`` on breakdown (every new
        direction dependent on the observed ones, or zero); its products are counted
        either way. Raises :class:`~pnsolve.NotPositiveDefiniteError` when the curvature
        ``Cᵀ A C`` is clearly negative under the inverse prior.

        ``allow_products=False`` (a product-free virtual run) never recomputes images: it
        drops the directions whose images it cannot trust.
        """
        if S.ndim != 2 or S.shape != Z.shape or S.shape[1] == 0:
            raise ValueError(f"condition needs (n, m) blocks with m ≥ 1, got {tuple(S.shape)}")
        # n conjugate directions span R^n: more is rounding noise (an H200 reached 60 of 50)
        room = S.shape[0] - self.V.view().shape[1]
        if room <= 0:
            return self._breakdown(r, 0, 0)
        SZ, ASZ, extra = self.prior.covariance_of_images(self.A, S, Z)
        # Curvature of the action before any cancellation: sᵀAs (inverse prior) or zᵀΣ₀z.
        prior_curv = torch.linalg.vecdot(Z, SZ, dim=0).abs()
        if S.shape[1] == 1:  # one action: a leaner path; None where this one must decide
            if self.device_path:
                update = self._condition_one(S, Z, SZ, ASZ, prior_curv, r, extra, allow_products)
            elif self.shares and SZ is S and ASZ is Z:
                update = self._condition_one_on_host(S, Z, prior_curv, r)
            else:
                update = None
            if update is not None:
                return update
        if not bool(torch.isfinite(prior_curv).all()):
            raise NonFiniteObservation(f"non-finite action or image at iteration {iteration}")
        s_norm = torch.linalg.vector_norm(S, dim=0)
        ratio = torch.linalg.vector_norm(Z, dim=0) / torch.where(s_norm > 0, s_norm, 1.0)
        self.norm_A = torch.maximum(self.norm_A, ratio.max())
        block = self._conjugated(S, Z, SZ, ASZ, prior_curv)
        products, matvecs = extra, extra * S.shape[1]
        B, checked = self._basis(block, prior_curv, iteration, allow_products)
        products, matvecs = products + (1 if checked else 0), matvecs + checked
        if B is None:
            return self._breakdown(r, products, matvecs)
        if B.shape[1] > room:  # keep the directions of largest curvature (eigh: ascending)
            B = B[:, -room:]
        new, redone = self._trusted(block.combined(B), allow_products, iteration)
        products, matvecs = products + (1 if redone else 0), matvecs + redone
        if new is None:
            return self._breakdown(r, products, matvecs)
        g = new.T.mT @ r
        self._store(new)
        return Update(
            dx=new.C @ g,
            dr=new.AC @ g,
            rank_added=new.C.shape[1],
            products=products,
            matvecs=matvecs,
        )

    def _store(self, new: Block) -> None:
        """Append the new directions, their images and image-error estimates."""
        self.V.append(new.C)
        self.AV.append(new.AC)
        if not self.shares:
            self.T.append(new.T)
            self.W.append(new.W)
        self.weight = torch.cat([self.weight, new.err])

    def _conjugated(self, S, Z, SZ, ASZ, prior_curv, masked: bool = False) -> Block:
        """The block ``Σ_i Z`` (``C``), its image ``AC``, the right factor and the images.

        Gram–Schmidt against the observed directions (CGS2, the second pass where needed);
        ``err`` estimates ``‖AC − A C‖`` in units of ``eps ‖A‖`` from a fresh product's.
        """
        err = torch.linalg.vector_norm(SZ, dim=0)
        C, AC, Tn, Wn = SZ, ASZ, S, Z
        if self.V.view().shape[1]:
            scale = prior_curv.sqrt()
            C, AC, Tn, Wn, inc = self._conjugate(Z, C, AC, S, Z, scale, masked)
            err = torch.hypot(err, inc)
            if masked or not self._orthogonal_after_one_pass(C, Wn, prior_curv):
                C, AC, Tn, Wn, inc = self._conjugate(Wn, C, AC, Tn, Wn, scale, masked)  # CGS2
                err = torch.hypot(err, inc)
        elif self.shares:
            Tn, Wn = C, AC
        return Block(C, AC, Tn, Wn, err)

    def _basis(
        self, block: Block, prior_curv, iteration: int, allow_products: bool = True
    ) -> tuple[torch.Tensor | None, int]:
        """``B`` with ``(C B)ᵀ A (C B) = I`` over the non-dependent directions, or ``None``.

        Also returns the columns of the product spent on confirming negative curvature
        (0: none). Under the inverse prior, curvature below minus its attainable accuracy
        (:func:`~pnsolve.solvers.curvature.curvature_floor`, or the skew part of the
        computed Gram matrix, whichever is larger) is confirmed with a fresh product
        ``A C`` when products are allowed: still negative, it raises
        :class:`~pnsolve.NotPositiveDefiniteError`; not, the recursive images had lost
        it to rounding and the direction is dropped as dependent (a breakdown when
        nothing else is left). A virtual run (no products) raises on the recursive value.
        """
        C, Wn = block.C, block.W
        # G = Wnᵀ C: Cᵀ A C under the inverse prior, zᵀ Σ_i z in general.
        G = Wn.mT @ C
        skew = 0.5 * (G - G.mT)
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
        checked = 0
        if self.shares:
            asymmetry = float(torch.linalg.matrix_norm(skew * d[:, None] * d[None, :]))
            floor = max(self._curvature_floor(C, d, band), asymmetry)
            if float(lam.min()) < -floor:
                if not allow_products:
                    raise not_positive_definite(float(lam.min()), d, iteration)
                checked = C.shape[1]
                self._confirm_negative(C, d, band, iteration)
        keep = lam > band
        if not bool(keep.any()):
            return None, checked
        return d[:, None] * Q[:, keep] * lam[keep].rsqrt(), checked

    def _curvature_floor(self, C: torch.Tensor, d: torch.Tensor, band: float) -> float:
        """:func:`~pnsolve.solvers.curvature.curvature_floor` with this run's ``‖A‖``."""
        return curvature_floor(C, d, band, float(self.norm_A), self.sqrt_n, self.eps)

    def _confirm_negative(
        self, C: torch.Tensor, d: torch.Tensor, band: float, iteration: int
    ) -> None:
        """Raise if ``Cᵀ (A C)`` with a fresh product is clearly negative (one product)."""
        lam = equilibrated_curvature(C, self.A @ C, d)
        if lam < -self._curvature_floor(C, d, band):
            raise not_positive_definite(lam, d, iteration, fresh=True)

    def _trusted(
        self, new: Block, allow_products: bool, iteration: int
    ) -> tuple[Block | None, int]:
        """The new directions with images that can be trusted; the columns multiplied.

        The second value is the number of columns whose images were recomputed by one
        product (0: no product).

        A recursive image that lost accuracy to cancellation, and that a fresh product
        would compute clearly better, is untrusted: one product redoes the block's images;
        a virtual run (no products) drops those directions instead. Blocks and redone
        images are orthonormalised once more (:meth:`_refine`). ``None``: nothing left.
        """
        fresh = torch.linalg.vector_norm(new.C, dim=0)
        tol = image_tolerance(self.eps) * torch.linalg.vector_norm(new.AC, dim=0)
        untrusted = (self.eps * self.norm_A * new.err > tol) & (new.err > REDO_GAIN * fresh)
        redo = self.shares and allow_products and bool(untrusted.any())
        redone = new.C.shape[1] if redo else 0
        if redo:
            AVn = self.A @ new.C
            new = Block(new.C, AVn, new.T, AVn, fresh)
        elif not allow_products and bool(untrusted.any()):
            if bool(untrusted.all()):
                return None, 0
            new = new.columns(~untrusted)
        if redo or new.C.shape[1] > 1:
            refined = self._refine(new.C, new.AC, new.T, new.W, new.err, iteration)
            return (None if refined is None else Block(*refined)), redone
        return new, redone

    def _breakdown(self, r: torch.Tensor, products: int, matvecs: int) -> Update:
        """No direction added (all dependent); the products spent are still counted."""
        zero = torch.zeros_like(r)
        return Update(dx=zero, dr=zero, rank_added=0, products=products, matvecs=matvecs)
