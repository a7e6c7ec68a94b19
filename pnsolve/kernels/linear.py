"""Linear (dot-product) and polynomial kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .kernel import TileOperands
from .leaf import LeafKernel, positive_property

__all__ = ["Linear", "Polynomial"]


class Linear(LeafKernel):
    """``k(x, x') = variance · xᵀx'`` (Bayesian linear regression through the origin).

    Scikit-learn's ``DotProduct(sigma_0)`` is ``Constant(sigma_0**2) + Linear(1.0)``;
    GPyTorch's ``LinearKernel(variance)`` without ARD is ``Linear(variance)`` (with ARD
    variances, a sum of one-column ``Linear(v_j, active_dims=[j])``).

    Parameters
    ----------
    variance
        Positive float or 0-d tensor (``raw_variance``, softplus, float64).
    active_dims
        Input columns the kernel reads (default all).

    Notes
    -----
    The kernel matrix has rank at most ``d``: a sum with a full-rank kernel or noise is
    what a solver needs. It has no random Fourier features (not stationary).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    >>> pn.kernels.Linear(variance=0.5)(X).item()
    2.5
    """

    def __init__(
        self, variance: float | torch.Tensor = 1.0, *, active_dims: Sequence[int] | None = None
    ) -> None:
        super().__init__(active_dims)
        self._positive_parameters(variance=(variance, 0))

    variance = positive_property("variance", "The prior variance of the weights, shape ``()``.")

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        Z1 = self.select(X1)
        Z2 = Z1 if X2 is None else self.select(X2)
        return self._value("variance", X1) * (Z1 @ Z2.mT)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        Z = self.select(X)
        return self._value("variance", X) * (Z * Z).sum(-1)

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self._value("variance", X1) * (self.select(X1) * self.select(X2)).sum(-1)

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """The active columns."""
        return (self.select(X).contiguous(),)

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """One GEMM ``x xᵀ``."""
        torch.mm(a[0], b[0].mT, out=s)

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """The variance."""
        return self._value("variance", like)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``xᵀx'`` as a KeOps scalar product."""
        za = self.select(A).contiguous()
        zb = self.select(B).contiguous()
        return LazyTensor(za[:, None, :]) | LazyTensor(zb[None, :, :])

    def extra_repr(self) -> str:
        """The variance."""
        with torch.no_grad():
            return f"variance={float(self.variance):.4g}{self._dims_repr()}"


class Polynomial(LeafKernel):
    """``k(x, x') = (xᵀx' + offset)^degree``.

    GPyTorch's ``PolynomialKernel(power, offset)``; scikit-learn's
    ``DotProduct(sigma_0) ** degree`` with ``offset = sigma_0**2``. Multiply by a
    :class:`~pnsolve.kernels.Constant` for a learned scale.

    Parameters
    ----------
    degree
        Positive int (fixed).
    offset
        Positive float or 0-d tensor (``raw_offset``, softplus, float64; learned).
    active_dims
        Input columns the kernel reads (default all).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    >>> pn.kernels.Polynomial(degree=2, offset=1.0)(X).item()
    36.0
    """

    def __init__(
        self,
        degree: int = 2,
        offset: float | torch.Tensor = 1.0,
        *,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"degree must be a positive int, got {degree!r}")
        super().__init__(active_dims)
        #: The fixed degree.
        self.degree = degree
        self._positive_parameters(offset=(offset, 0))

    offset = positive_property("offset", "The offset added to ``xᵀx'``, shape ``()``.")

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        Z1 = self.select(X1)
        Z2 = Z1 if X2 is None else self.select(X2)
        return (Z1 @ Z2.mT + self._value("offset", X1)) ** self.degree

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        Z = self.select(X)
        return ((Z * Z).sum(-1) + self._value("offset", X)) ** self.degree

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        dot = (self.select(X1) * self.select(X2)).sum(-1)
        return (dot + self._value("offset", X1)) ** self.degree

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """``[x, 1]`` (left) and ``[x, offset]`` (right): one GEMM gives ``xᵀx' + offset``."""
        Z = self.select(X)
        last = Z.new_ones(Z.shape[0], 1)
        if not left:
            last = last * self._value("offset", X)
        return (torch.cat([Z, last], dim=1),)

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """One GEMM, then the power in place."""
        torch.mm(a[0], b[0].mT, out=s)
        if self.degree > 1:
            s.pow_(self.degree)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``(xᵀx' + offset)^degree`` with the offset a pykeops parameter."""
        za = self.select(A).contiguous()
        zb = self.select(B).contiguous()
        c = LazyTensor(self._value("offset", A).reshape(1))
        base = (LazyTensor(za[:, None, :]) | LazyTensor(zb[None, :, :])) + c
        return base if self.degree == 1 else base**self.degree

    def extra_repr(self) -> str:
        """Degree and offset."""
        with torch.no_grad():
            return f"degree={self.degree}, offset={float(self.offset):.4g}{self._dims_repr()}"
