"""Periodic (exp-sine-squared) and cosine kernels."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ._exp import clamped_exp_
from .kernel import TileOperands
from .leaf import KnownSpectrum, LeafKernel, positive_property

__all__ = ["Cosine", "Periodic"]


class Periodic(LeafKernel):
    """``k(x, x') = exp(−2 Σ_j sin²(π (x_j − x'_j) / p_j) / ℓ_j²)``.

    The periodic (exp-sine-squared) kernel of MacKay (1998), summed over input
    dimensions as in GPyTorch's ``PeriodicKernel`` (whose lengthscale ``λ`` is this
    ``ℓ²``: GPyTorch divides by ``λ``) — a product of one-dimensional periodic kernels,
    so positive semi-definite for every ``d``. For one-dimensional
    inputs it is scikit-learn's ``ExpSineSquared(length_scale, periodicity)``
    (scikit-learn applies the sine to the Euclidean distance instead, which for ``d > 1``
    is not positive semi-definite in general). Multiply by a stationary kernel or a
    :class:`~pnsolve.kernels.Constant` for a scale.

    Parameters
    ----------
    lengthscale
        Positive float, or a ``(d,)`` tensor (one per active column).
    period
        Positive float, or a ``(d,)`` tensor.
    active_dims
        Input columns the kernel reads (default all).

    Notes
    -----
    Each tile is one GEMM of the features ``[cos u, sin u]`` with ``u = 2π x / p``
    (``cos(u − u') = cos u cos u' + sin u sin u'``) and one ``exp``: the cost of an RBF
    tile. Inputs far from zero lose absolute accuracy in ``u`` (``eps · |u|``): centre
    inputs such as years. No random Fourier features (the spectrum is discrete).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> k = pn.kernels.Periodic(lengthscale=1.0, period=3.0)
    >>> X = torch.tensor([[0.0], [3.0]], dtype=torch.float64)
    >>> round(k(X)[0, 1].item(), 12)
    1.0
    """

    stationary = True
    tile_exp = True

    def __init__(
        self,
        lengthscale: float | torch.Tensor = 1.0,
        period: float | torch.Tensor = 1.0,
        *,
        active_dims: Sequence[int] | None = None,
    ) -> None:
        super().__init__(active_dims)
        self._positive_parameters(lengthscale=(lengthscale, 1), period=(period, 1))
        sizes = self._vector_sizes()
        if len(sizes) > 1:
            raise ValueError(
                f"lengthscale and period have {sorted(sizes)} entries; give equal sizes"
            )
        self.input_dims()  # checks the sizes against active_dims

    lengthscale = positive_property("lengthscale", "Lengthscale, shape ``()`` or ``(d,)``.")

    period = positive_property("period", "Period, shape ``()`` or ``(d,)``.")

    def _angles(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(u = 2π x / p, 1/ℓ²)`` broadcast to the active columns."""
        Z = self.select(X)
        u = (2.0 * math.pi) * Z / self._value("period", X)
        w = self._value("lengthscale", X).pow(-2).expand(Z.shape[1])
        return u, w

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """``[cos u/ℓ², sin u/ℓ², 1]`` (left), ``[cos u, sin u, −Σ 1/ℓ²]`` (right)."""
        u, w = self._angles(X)
        c, s = torch.cos(u), torch.sin(u)
        one = u.new_ones(u.shape[0], 1)
        if left:
            return (torch.cat([c * w, s * w, one], dim=1),)
        return (torch.cat([c, s, -w.sum() * one], dim=1),)

    def _exponent(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        """Differentiable ``Σ_j (cos Δu_j − 1) / ℓ_j²`` with exact zeros on self pairs."""
        (a,) = self.tile_operands(X1, left=True)
        (b,) = self.tile_operands(X1 if X2 is None else X2, left=False)
        e = a @ b.mT
        if X2 is None and self_index is None:
            self_index = torch.arange(X1.shape[0], device=X1.device)
        if self_index is not None:
            cols = torch.arange(e.shape[1], device=e.device)
            mask = self_index.unsqueeze(-1) == cols.unsqueeze(0)
            e = torch.where(mask, torch.zeros((), dtype=e.dtype, device=e.device), e)
        return e

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        return torch.exp(self._exponent(X1, X2, self_index))

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return X.new_ones(X.shape[0]) + 0.0 * self._value("period", X).sum()

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        u1, w = self._angles(X1)
        u2, _ = self._angles(X2)
        half = torch.sin(0.5 * (u1 - u2))
        return torch.exp(-2.0 * (half * half * w).sum(-1))

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """One GEMM of the features, exact self pairs, one ``exp`` (exponent floored).

        The exponent ``Σ_j (cos Δu_j − 1) / ℓ_j²`` is clamped at
        :func:`~pnsolve.kernels._exp.exp_floor` (short lengthscales reach below it):
        entries change by less than ``1.02 · finfo.tiny`` and none is subnormal.
        """
        torch.mm(a[0], b[0].mT, out=s)
        if diag is not None:
            s.diagonal(diag).zero_()
        clamped_exp_(s)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``exp`` of the features' scalar product."""
        (a,) = self.tile_operands(A, left=True)
        (b,) = self.tile_operands(B, left=False)
        la, lb = LazyTensor(a.contiguous()[:, None, :]), LazyTensor(b.contiguous()[None, :, :])
        return (la | lb).exp()

    def extra_repr(self) -> str:
        """Lengthscale and period."""
        with torch.no_grad():
            return (
                f"lengthscale={_fmt(self.lengthscale)}, period={_fmt(self.period)}"
                f"{self._dims_repr()}"
            )


class Cosine(KnownSpectrum):
    """``k(x, x') = cos(2π Σ_j (x_j − x'_j) / p_j)``.

    The kernel of a single sinusoid with random phase: its spectrum is two point masses
    at ``±(1/p_1, …, 1/p_d)``, so it is positive semi-definite for every ``d`` and has
    rank at most 2. For one-dimensional inputs it is GPyTorch's ``CosineKernel(p)`` with
    ``period = 2p`` (GPyTorch computes ``cos(π r / p)``; it applies the cosine to the
    Euclidean distance, which for ``d > 1`` is not positive semi-definite in general, so
    pnsolve projects on the frequency vector).

    Parameters
    ----------
    period
        Positive float, or a ``(d,)`` tensor (one per active column).
    active_dims
        Input columns the kernel reads (default all).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.tensor([[0.0], [0.5]], dtype=torch.float64)
    >>> round(pn.kernels.Cosine(period=2.0)(X)[0, 1].item(), 12)
    0.0
    """

    stationary = True

    def __init__(
        self, period: float | torch.Tensor = 1.0, *, active_dims: Sequence[int] | None = None
    ) -> None:
        super().__init__(active_dims)
        self._positive_parameters(period=(period, 1))
        self.input_dims()

    period = positive_property("period", "Period, shape ``()`` or ``(d,)``.")

    def _phase(self, X: torch.Tensor) -> torch.Tensor:
        """``u = 2π Σ_j x_j / p_j``, shape ``(n,)``."""
        Z = self.select(X)
        return (2.0 * math.pi) * (Z / self._value("period", X)).sum(-1)

    def features(self, X: torch.Tensor) -> torch.Tensor:
        """``[cos u, sin u]``, shape ``(n, 2)``: ``k(x, x') = φ(x)ᵀφ(x')`` exactly."""
        u = self._phase(X)
        return torch.stack([torch.cos(u), torch.sin(u)], dim=1)

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        f1 = self.features(X1)
        f2 = f1 if X2 is None else self.features(X2)
        return f1 @ f2.mT

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return X.new_ones(X.shape[0]) + 0.0 * self._value("period", X).sum()

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return torch.cos(self._phase(X1) - self._phase(X2))

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """The two features."""
        return (self.features(X),)

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """One rank-2 GEMM."""
        torch.mm(a[0], b[0].mT, out=s)

    def spectral_projection(
        self, X: torch.Tensor, base: torch.Tensor, phases: torch.Tensor, num_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The one frequency ``(1/p_1, …, 1/p_d)``: ``(2π Σ_j x_j / p_j + b, 1)``."""
        proj = self._phase(X).unsqueeze(1) + phases
        return proj, torch.ones((), dtype=X.dtype, device=X.device)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """The features' scalar product."""
        fa, fb = self.features(A).contiguous(), self.features(B).contiguous()
        return LazyTensor(fa[:, None, :]) | LazyTensor(fb[None, :, :])

    def extra_repr(self) -> str:
        """The period."""
        with torch.no_grad():
            return f"period={_fmt(self.period)}{self._dims_repr()}"


def _fmt(v: torch.Tensor) -> str:
    return f"{float(v):.4g}" if v.ndim == 0 else str([round(float(x), 4) for x in v])
