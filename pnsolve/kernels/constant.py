"""Constant and white-noise kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .kernel import TileOperands
from .leaf import KnownSpectrum, LeafKernel, positive_property

__all__ = ["Constant", "White"]


class Constant(KnownSpectrum):
    """``k(x, x') = value`` (a learned positive constant).

    In a product it is a learned scale: ``Constant(2.0) * RBF()`` is scikit-learn's
    ``ConstantKernel(2.0) * RBF()``, and costs nothing per tile (its scale multiplies
    each product once). In a sum it is a learned constant offset (a random bias).

    Parameters
    ----------
    value
        Positive float or 0-d tensor (stored as ``raw_value``, ``value = softplus(raw)``,
        float64).
    active_dims
        Accepted for uniformity (the value reads no column; it only requires them).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> pn.kernels.Constant(3.0)(torch.zeros(1, 2, dtype=torch.float64))
    tensor([[3.]], dtype=torch.float64, grad_fn=<MulBackward0>)
    """

    tile_is_ones = True

    stationary = True

    def __init__(
        self, value: float | torch.Tensor = 1.0, *, active_dims: Sequence[int] | None = None
    ) -> None:
        super().__init__(active_dims)
        self._positive_parameters(value=(value, 0))

    value = positive_property("value", "The constant, shape ``()``.")

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        n2 = X1.shape[0] if X2 is None else X2.shape[0]
        return self._value("value", X1) * X1.new_ones(X1.shape[0], n2)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return self._value("value", X) * X.new_ones(X.shape[0])

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self._diag(X1)

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """None needed."""
        return ()

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """Ones (the value is the tile scale)."""
        s.fill_(1.0)

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """The constant."""
        return self._value("value", like)

    def spectral_projection(
        self, X: torch.Tensor, base: torch.Tensor, phases: torch.Tensor, num_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Frequency zero: ``(b, value)`` (``E[2 cos² b] = 1``)."""
        proj = phases.expand(X.shape[0], phases.shape[0])
        return proj, self._value("value", X)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``1`` (as the product of two all-ones variables, so both sizes are known)."""
        return LazyTensor(A.new_ones(A.shape[0], 1, 1)) * LazyTensor(B.new_ones(1, B.shape[0], 1))

    def extra_repr(self) -> str:
        """The value."""
        with torch.no_grad():
            return f"value={float(self.value):.4g}{self._dims_repr()}"


class White(LeafKernel):
    """``k(x, x') = noise · [x and x' are the same point]`` (white noise).

    Only a point paired with itself gets ``noise`` — the diagonal of ``k(X, X)`` and
    :meth:`diag` — never two points of different input sets, even with equal values
    (as scikit-learn's ``WhiteKernel``: ``k(X, Y)`` is zero). In a GP the likelihood's
    noise already plays this role; use ``White`` for noise that belongs to the prior
    (e.g. scikit-learn models, or a noise term inside a product).

    Parameters
    ----------
    noise
        Positive float or 0-d tensor (``raw_noise``, softplus, float64).
    active_dims
        Accepted for uniformity.
    """

    tile_is_diagonal = True

    def __init__(
        self, noise: float | torch.Tensor = 1.0, *, active_dims: Sequence[int] | None = None
    ) -> None:
        super().__init__(active_dims)
        self._positive_parameters(noise=(noise, 0))

    noise = positive_property("noise", "The noise variance, shape ``()``.")

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        n1, n2 = X1.shape[0], (X1 if X2 is None else X2).shape[0]
        if X2 is None and self_index is None:
            self_index = torch.arange(n1, device=X1.device)
        mask = X1.new_zeros(n1, n2)
        if self_index is not None:
            cols = torch.arange(n2, device=X1.device)
            mask = (self_index.unsqueeze(-1) == cols.unsqueeze(0)).to(X1.dtype)
        return self._value("noise", X1) * mask

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return self._value("noise", X) * X.new_ones(X.shape[0])

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self._value("noise", X1) * X1.new_zeros(X1.shape[0])

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """None needed."""
        return ()

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """Zeros with ones on the self pairs' diagonal."""
        s.zero_()
        if diag is not None:
            s.diagonal(diag).fill_(1.0)

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """The noise variance."""
        return self._value("noise", like)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``step(1/2 − |i + offset − j|)`` on row and column indices (zero without self pairs)."""
        nA, nB = A.shape[0], B.shape[0]
        shift = nB + 1 if self_offset is None else self_offset  # no self pairs: never equal
        i = torch.arange(nA, dtype=A.dtype, device=A.device).add_(shift)
        j = torch.arange(nB, dtype=A.dtype, device=A.device)
        gap = LazyTensor(i.view(nA, 1, 1)) - LazyTensor(j.view(1, nB, 1))
        return (0.5 - gap.abs()).step()

    def extra_repr(self) -> str:
        """The noise variance."""
        with torch.no_grad():
            return f"noise={float(self.noise):.4g}{self._dims_repr()}"
