"""The softmax likelihood's negative Hessian ``W`` and its closed-form pseudo-inverse ``W⁺``.

Both act on the **class-major** flat latent vector (entry ``c·n + i`` is ``f[i, c]``)
in ``O(n C)`` per column, without forming the ``C × C`` blocks or the ``(C·n) × (C·n)``
matrix.
"""

from __future__ import annotations

from typing import TypeVar

import torch

from .._core.validation import check_finite, check_tensor
from ..linops.base import LinearOperator
from .base import curvature_floor

__all__ = ["SoftmaxHessian", "SoftmaxHessianPinv"]


def _check_probs(probs: object) -> torch.Tensor:
    probs = check_finite(check_tensor(probs, "probs"), "probs")
    if probs.ndim != 2 or probs.shape[1] < 2:
        raise ValueError(f"probs must have shape (n, C) with C ≥ 2, got {tuple(probs.shape)}")
    if not probs.is_floating_point():
        raise TypeError(f"probs must have a floating dtype, got {probs.dtype}")
    if bool((probs < 0).any()):
        raise ValueError("probs must be non-negative")
    return probs


_Op = TypeVar("_Op", bound="_ClassMajor")


class _ClassMajor(LinearOperator):
    """Shared storage: class probabilities ``p`` as a ``(C, n)`` tensor (class-major)."""

    def __init__(self, probs: torch.Tensor) -> None:
        self._setup(_check_probs(probs))

    @classmethod
    def _from_softmax(cls: type[_Op], probs: torch.Tensor) -> _Op:
        """Skip the checks for ``probs = torch.softmax(f, 1)`` of an already checked ``f``."""
        op = cls.__new__(cls)
        op._setup(probs)
        return op

    def _setup(self, probs: torch.Tensor) -> None:
        n, C = probs.shape
        LinearOperator.__init__(
            self, (C * n, C * n), probs.dtype, probs.device, is_symmetric=True, is_psd=True
        )
        self._p = probs.mT.contiguous()  # (C, n)

    @property
    def probs(self) -> torch.Tensor:
        """Class probabilities ``p``, shape ``(n, C)``."""
        return self._p.mT

    @property
    def num_classes(self) -> int:
        """``C``."""
        return self._p.shape[0]

    def _blocks(self, X: torch.Tensor) -> torch.Tensor:
        C, n = self._p.shape
        return X.reshape(C, n, X.shape[-1])

    def _row_block_from(self, rows: torch.Tensor, entries: torch.Tensor) -> torch.Tensor:
        """Scatter per-row block entries ``(r, C)`` into dense rows ``(r, C·n)``."""
        C, n = self._p.shape
        i = rows % n
        cols = torch.arange(C, device=self.device).unsqueeze(0) * n + i.unsqueeze(1)
        out = torch.zeros(rows.numel(), C * n, dtype=self.dtype, device=self.device)
        return out.scatter_(1, cols, entries)


class SoftmaxHessian(_ClassMajor):
    """``W = blkdiag_i(diag(pᵢ) − pᵢ pᵢᵀ)``, the softmax likelihood's negative Hessian.

    Per data point ``i`` the ``C × C`` block is ``diag(pᵢ) − pᵢ pᵢᵀ`` with
    ``pᵢ = softmax(fᵢ)``; it is positive semi-definite with rank ``C − 1`` and null
    vector ``1`` (since ``Σ_c p_ic = 1``). In the class-major layout the operator is
    applied in ``O(n C)``: ``(W x)_ci = p_ci (x_ci − Σ_c' p_c'i x_c'i)``.

    Parameters
    ----------
    probs
        Class probabilities ``p``, shape ``(n, C)``, rows on the simplex.
    """

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        p = self._p.unsqueeze(-1)
        PX = p * self._blocks(X)
        return (PX - p * PX.sum(0, keepdim=True)).reshape(X.shape)

    def _diagonal(self) -> torch.Tensor:
        return (self._p * (1 - self._p)).reshape(-1)

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        n = self._p.shape[1]
        c, i = rows // n, rows % n
        pci = self._p[c, i]
        entries = -pci.unsqueeze(1) * self._p[:, i].mT
        entries[torch.arange(rows.numel(), device=self.device), c] += pci
        return self._row_block_from(rows, entries)

    def pinv(self) -> SoftmaxHessianPinv:
        """The Moore–Penrose pseudo-inverse ``W⁺`` in closed form (:class:`SoftmaxHessianPinv`)."""
        return SoftmaxHessianPinv._from_softmax(self.probs)


class SoftmaxHessianPinv(_ClassMajor):
    """``W⁺ = blkdiag_i(P Dᵢ⁻¹ P)``: the pseudo-inverse of :class:`SoftmaxHessian`.

    With ``D = diag(p)`` and the centring projector ``P = I − 11ᵀ/C`` (per point):

    1. ``W D⁻¹ = (D − ppᵀ) D⁻¹ = I − p1ᵀ``.
    2. ``(I − p1ᵀ) P = P − p1ᵀ + p(1ᵀ1)1ᵀ/C = P``, so ``W D⁻¹ P = P``.
    3. ``W 1 = p − p (pᵀ1) = 0``, hence ``W P = W`` and ``W (P D⁻¹ P) = W D⁻¹ P = P``.

    ``M = P D⁻¹ P`` is symmetric with range in ``range P = 1^⊥ = range W`` (when all
    ``p > 0``), and ``W M = M W = P`` is the orthogonal projector onto ``range W``; so
    ``W M W = P W = W`` and ``M W M = P M = M``: all four Moore–Penrose conditions hold
    and ``M = W⁺``. Applied in ``O(n C)``: centre over classes, divide by ``p``, centre
    again. Entries: ``M_ab = δ_ab/p_a − (1/p_a + 1/p_b)/C + (Σ_c 1/p_c)/C²``.

    Probabilities are clamped below at :func:`~pnsolve.likelihoods.curvature_floor`
    (``√eps`` of the dtype) inside ``D⁻¹``, so ``W⁺`` stays finite when a class
    probability underflows; for probabilities above the floor the formula is exact.

    Parameters
    ----------
    probs
        Class probabilities ``p``, shape ``(n, C)``, rows on the simplex.
    """

    def _setup(self, probs: torch.Tensor) -> None:
        super()._setup(probs)
        self._inv_p = self._p.clamp(min=curvature_floor(self.dtype)).reciprocal()  # (C, n)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        Y = self._blocks(X)
        Y = (Y - Y.mean(0, keepdim=True)) * self._inv_p.unsqueeze(-1)
        return (Y - Y.mean(0, keepdim=True)).reshape(X.shape)

    def _diagonal(self) -> torch.Tensor:
        C = self.num_classes
        s = self._inv_p.sum(0, keepdim=True)
        return (self._inv_p * (1 - 2 / C) + s / C**2).reshape(-1)

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        C, n = self._p.shape
        c, i = rows // n, rows % n
        inv_a = self._inv_p[c, i].unsqueeze(1)  # (r, 1)
        inv_b = self._inv_p[:, i].mT  # (r, C)
        entries = -(inv_a + inv_b) / C + inv_b.sum(1, keepdim=True) / C**2
        entries[torch.arange(rows.numel(), device=self.device), c] += inv_a.squeeze(1)
        return self._row_block_from(rows, entries)
