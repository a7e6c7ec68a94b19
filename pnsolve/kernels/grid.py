"""Regular grids and Keys' cubic convolution weights (the ``W`` of SKI)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..linops.interpolation import SparseInterpolation

__all__ = ["Grid", "keys_weights"]

#: Keys' parameter ``a = −1/2``: the cubic convolution kernel of third-order accuracy
#: (it reproduces polynomials of degree ≤ 2 exactly).
KEYS_A = -0.5


def keys_weights(s: torch.Tensor) -> torch.Tensor:
    """Keys' (1981) cubic convolution kernel ``u(s)`` with ``a = −1/2``, elementwise.

    ``u(s) = (a+2)|s|³ − (a+3)|s|² + 1`` for ``|s| ≤ 1``, ``a|s|³ − 5a|s|² + 8a|s| − 4a``
    for ``1 < |s| < 2``, ``0`` beyond.
    """
    a = KEYS_A
    t = s.abs()
    inner = ((a + 2) * t - (a + 3)) * t * t + 1
    outer = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return torch.where(t <= 1, inner, torch.where(t < 2, outer, torch.zeros_like(t)))


@dataclass(frozen=True)
class Grid:
    """A regular grid ``u_{i} = lower + i · spacing`` per dimension, ``i = 0 … size − 1``.

    Points are interpolated on ``[lower + spacing, lower + (size − 2) · spacing]`` per
    dimension (the interior: cubic interpolation needs one grid point beyond each side).

    Attributes
    ----------
    lower
        First grid point per dimension, shape ``(d,)`` (float64, CPU).
    spacing
        Grid spacing per dimension, shape ``(d,)``.
    sizes
        Points per dimension ``(m₁, …, m_d)``; ``m = ∏ m_j``.
    """

    lower: tuple[float, ...]
    spacing: tuple[float, ...]
    sizes: tuple[int, ...]

    @classmethod
    def covering(cls, bounds: list[tuple[float, float]], sizes: tuple[int, ...]) -> Grid:
        """The grid whose interior is exactly ``bounds`` (one extra point beyond each end)."""
        lower, spacing = [], []
        for (lo, hi), m in zip(bounds, sizes, strict=True):
            h = (hi - lo) / (m - 3)
            lower.append(lo - h)
            spacing.append(h)
        return cls(tuple(lower), tuple(spacing), tuple(sizes))

    @property
    def dim(self) -> int:
        """Number of dimensions ``d``."""
        return len(self.sizes)

    @property
    def size(self) -> int:
        """Number of grid points ``m``."""
        return math.prod(self.sizes)

    def interior(self, j: int) -> tuple[float, float]:
        """The interval of dimension ``j`` on which inputs can be interpolated."""
        h = self.spacing[j]
        return self.lower[j] + h, self.lower[j] + (self.sizes[j] - 2) * h

    def offsets(self, j: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Distances ``i · spacing_j`` from the first grid point, shape ``(m_j,)``."""
        return self.spacing[j] * torch.arange(self.sizes[j], dtype=dtype, device=device)

    def _grid_units(self, X: torch.Tensor, j: int) -> torch.Tensor:
        """Column ``j`` of ``X`` ``(n, d)`` in grid units from the first grid point, ``(n,)``.

        Detached from autograd, as the interpolation weights are.
        """
        return (X[:, j].detach() - self.lower[j]) / self.spacing[j]

    def check_covers(self, X: torch.Tensor, name: str = "X") -> None:
        """Raise ``ValueError`` naming ``name`` if a row of ``X`` ``(n, d)`` is off the interior.

        A slack of ``10⁻⁶`` of the interior's width absorbs the rounding of bounds
        computed from the data.
        """
        for j in range(X.shape[1]):
            m = self.sizes[j]
            t = self._grid_units(X, j)
            slack = 1e-6 * (m - 3)
            outside = ((t < 1 - slack) | (t > m - 2 + slack)).nonzero()  # (rows, 1)
            if outside.numel():
                i = int(outside[0, 0])
                lo, hi = self.interior(j)
                raise ValueError(
                    f"{name} has a point outside the grid in dimension {j}: row {i} has "
                    f"{float(X[i, j]):.6g}, the grid interpolates on [{lo:.6g}, {hi:.6g}]. "
                    "Pass grid_bounds that cover every input (training and test) to "
                    "GridInterpolation."
                )

    def interpolation(self, X: torch.Tensor, name: str = "X") -> SparseInterpolation:
        """Keys' cubic interpolation weights of the rows of ``X`` ``(n, d)``: ``W`` ``(n, m)``.

        Each row holds ``4ᵈ`` weights, the tensor product of the four 1-D weights of the
        surrounding grid points per dimension.

        Raises
        ------
        ValueError
            If a point lies outside the grid's interior (the message names ``name``,
            the dimension and the interval).
        """
        self.check_covers(X, name)
        n, d = X.shape
        idx = torch.zeros(n, 1, dtype=torch.long, device=X.device)
        val = torch.ones(n, 1, dtype=X.dtype, device=X.device)
        stencil = torch.arange(-1, 3, device=X.device)
        for j in range(d):
            m = self.sizes[j]
            t = self._grid_units(X, j)
            base = t.floor().clamp(1, m - 3)  # stencil base − 1, base, base + 1, base + 2
            f = (t - base).unsqueeze(-1)  # in [0, 1]
            w = keys_weights(f - stencil.to(X.dtype))  # (n, 4)
            cols = base.long().unsqueeze(-1) + stencil  # (n, 4)
            idx = (idx.unsqueeze(-1) * m + cols.unsqueeze(1)).reshape(n, -1)
            val = (val.unsqueeze(-1) * w.unsqueeze(1)).reshape(n, -1)
        return SparseInterpolation(idx, val, self.size)
