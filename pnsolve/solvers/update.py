"""What one belief update produces, and the trust it places in recursive images.

Shared by the conditioner's general path (:mod:`~pnsolve.solvers.conditioning`) and its
single-action paths (:mod:`~pnsolve.solvers.single_action`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

__all__ = ["REDO_GAIN", "Block", "NonFiniteObservation", "Update", "image_tolerance"]


#: A recursive image is recomputed only when a fresh product bounds its error this many
#: times more tightly (on an ill-conditioned system in low precision a fresh product is
#: no better than the recursion, and the product would be wasted).
REDO_GAIN = 16.0


def image_tolerance(eps: float) -> float:
    """Largest relative error bound of a stored image ``A v`` kept without recomputing it.

    ``√eps``: ``1.5e-8`` in float64, ``3.5e-4`` in float32. Recursive images
    ``z − AV coef`` lose accuracy only through cancellation (about ``eps / ρ`` for an
    image that keeps a fraction ``ρ`` of the terms it is formed from); genuine Krylov,
    unit-vector and random directions keep ``ρ ≫ √eps``, so the extra product that resets
    the bound is spent only on degenerate actions (stalled residuals, repeated or
    near-dependent custom actions).
    """
    return math.sqrt(eps)


class NonFiniteObservation(ValueError):
    """The action or its image holds NaN/Inf (seen through the curvature ``zᵀ Σ₀ z``)."""


@dataclass(frozen=True)
class Update:
    """Result of one conditioning step."""

    dx: torch.Tensor  # (n,) mean increment
    dr: torch.Tensor  # (n,) residual decrement
    rank_added: int  # 0: breakdown (every new direction dependent); dx = dr = 0 then
    products: int  # extra products with A (0 under the inverse prior unless images are redone)
    matvecs: int  # columns multiplied in those extra products
    #: ``‖r − dr‖`` read on the host with the update's flags (device path), else ``None``
    residual_norm: float | None = None


class Block(NamedTuple):
    """New directions in the making, with what the update needs of them.

    ``C`` (``n × m``), its image ``AC``, the right factor ``T`` and the normalised
    images ``W`` (``T is C``, ``W is AC`` under the inverse prior), and ``err``, the
    estimated error of ``AC`` in units of ``eps ‖A‖``, shape ``(m,)``.
    """

    C: torch.Tensor
    AC: torch.Tensor
    T: torch.Tensor
    W: torch.Tensor
    err: torch.Tensor

    def combined(self, B: torch.Tensor) -> Block:
        """The directions ``C B`` (and so on); errors combined in quadrature."""
        err = torch.linalg.vector_norm(B * self.err[:, None], dim=0)
        return Block(self.C @ B, self.AC @ B, self.T @ B, self.W @ B, err)

    def columns(self, keep: torch.Tensor) -> Block:
        """The columns where ``keep`` (a bool mask) is true."""
        C, AC, T, W = (M[:, keep] for M in (self.C, self.AC, self.T, self.W))
        return Block(C, AC, T, W, self.err[keep])
