"""Structured kernel interpolation (SKI / KISS-GP): ``k(x, x') ≈ w(x)ᵀ K_UU w(x')``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .._core.precision import full_float32
from ..linops.base import LinearOperator
from ..linops.kronecker import Kronecker
from ..linops.toeplitz import Toeplitz
from .base import StationaryKernel
from .grid import Grid
from .grid_config import (
    MAX_GRID_DIMS,
    MAX_GRID_POINTS,
    _check_bounds,
    _check_dim,
    _check_grid_size,
    _data_bounds,
)
from .kernel import Kernel, describe_kernel
from .ski_matrix import GridInterpolationMatrix

__all__ = ["MAX_GRID_DIMS", "MAX_GRID_POINTS", "GridInterpolation"]


_BACKENDS = ("auto", "dense", "chunked", "keops")


class GridInterpolation(Kernel):
    """SKI kernel ``k_SKI(x, x') = w(x)ᵀ K_UU w(x')`` on a regular grid (KISS-GP).

    Wilson & Nickisch (2015): ``K_UU = k(U, U)`` is the base kernel on a regular grid
    ``U`` of ``m = ∏ m_j`` points and ``w(x)`` holds the local cubic convolution
    weights (Keys, 1981; ``a = −1/2``) of ``x`` on the ``4ᵈ`` surrounding grid points.
    For a stationary base kernel ``K_UU`` is a (multilevel) Toeplitz matrix, and for a
    separable one (the RBF, ARD or not) a Kronecker product of ``d`` symmetric Toeplitz
    factors; products with ``K = W K_UU Wᵀ`` then cost ``O(n 4ᵈ + m log m)`` through
    ``torch.fft`` and memory ``O(n 4ᵈ + m)``.

    Parameters
    ----------
    base_kernel
        A :class:`~pnsolve.kernels.StationaryKernel` (``RBF``, ``Matern``, ARD or not);
        its parameters are this kernel's (shared, not copied).
    grid_size
        Grid points per dimension, an int (every dimension) or one int per dimension;
        at least 4 (cubic interpolation needs 4 points per dimension).
    grid_bounds
        ``[(lo_1, hi_1), …, (lo_d, hi_d)]``: the interval of each dimension inside which
        inputs are interpolated (the grid extends one spacing beyond each end). Default
        ``None``: the range of the inputs plus a 5 % margin on each side — taken from
        the training inputs when a model is fitted (:meth:`bind`), from ``X1`` and ``X2``
        together otherwise.

    Raises
    ------
    TypeError
        If ``base_kernel`` is not a stationary pnsolve kernel, or ``grid_size`` is not an
        int or a sequence of ints.
    ValueError
        For ``grid_size < 4``, bad ``grid_bounds`` (not finite, ``lo ≥ hi``), dimensions
        that disagree (``grid_size``, ``grid_bounds``, the base kernel's ARD
        lengthscales, the inputs), more than :data:`MAX_GRID_DIMS` input dimensions or
        more than :data:`MAX_GRID_POINTS` grid points; for inputs outside the grid.

    Notes
    -----
    * ``k(X1, X2)`` returns the dense ``W₁ K_UU W₂ᵀ`` (a reference: ``n1 × n2`` memory);
      ``k.linop(X1, X2)`` the structured
      :class:`~pnsolve.kernels.ski_matrix.GridInterpolationMatrix`; ``k.diag(X)``
      ``w(x)ᵀ K_UU w(x)`` in ``O(16ᵈ)`` per point (the ``4ᵈ × 4ᵈ`` block of ``K_UU``
      between a point's stencil is the same for every point).
    * Keys' kernel reproduces polynomials of degree ≤ 2 exactly (third-order accurate);
      cubic polynomials carry an ``O(h³)`` error.
    * Gradients reach the base kernel's hyperparameters through ``K_UU``; the inputs get
      none (the interpolation weights are piecewise polynomials of ``x`` treated as
      constants).
    * The ``backend`` argument of :meth:`linop` is accepted for interchangeability with
      stationary kernels and has no effect: the SKI operator has one structure.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> k = pn.kernels.GridInterpolation(pn.kernels.RBF(lengthscale=0.3), grid_size=64,
    ...                                   grid_bounds=[(0.0, 1.0)])
    >>> X = torch.linspace(0, 1, 5, dtype=torch.float64).unsqueeze(-1)
    >>> bool((k(X) - pn.kernels.RBF(lengthscale=0.3)(X)).abs().max() < 1e-3)
    True
    """

    def __init__(
        self,
        base_kernel: StationaryKernel,
        grid_size: int | Sequence[int],
        grid_bounds: Sequence[tuple[float, float]] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(base_kernel, Kernel) or not base_kernel.stationary:
            raise TypeError(
                "base_kernel must be a stationary pnsolve kernel (RBF, Matern, "
                "RationalQuadratic, Periodic, Cosine, SpectralMixture, Constant, or sums "
                "and products of them): K_UU on a regular grid is Toeplitz only for "
                f"stationary kernels; got {describe_kernel(base_kernel)}"
            )
        if _reads_columns(base_kernel):
            raise ValueError(
                "the base kernel of GridInterpolation must read every input column (no "
                f"active_dims): the grid spans all of them; got {describe_kernel(base_kernel)}"
            )
        self.base_kernel = base_kernel
        self._sizes = _check_grid_size(grid_size)
        self.grid_bounds = None if grid_bounds is None else _check_bounds(grid_bounds)
        dims = {
            "grid_size": None if len(self._sizes) == 1 and isinstance(grid_size, int)
            else len(self._sizes),
            "grid_bounds": None if self.grid_bounds is None else len(self.grid_bounds),
            "the base kernel's ARD lengthscales": base_kernel.input_dims()[0],
        }  # fmt: skip
        known = {k: v for k, v in dims.items() if v is not None}
        if len(set(known.values())) > 1:
            raise ValueError(
                "input dimensions disagree: "
                + ", ".join(f"{k} gives d = {v}" for k, v in known.items())
            )
        #: Input dimension ``d`` if the arguments fix it, else ``None`` (taken from data).
        self.dim: int | None = next(iter(known.values()), None)
        if self.dim is not None:
            _check_dim(self.dim, self._sizes_for(self.dim))

    # ------------------------------------------------------------------ the grid
    @property
    def grid_size(self) -> tuple[int, ...]:
        """Grid points per dimension as given (one entry when a single int was given)."""
        return self._sizes

    def _sizes_for(self, d: int) -> tuple[int, ...]:
        return self._sizes * d if len(self._sizes) == 1 and d > 1 else self._sizes

    def grid(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> Grid:
        """The grid for inputs ``X1`` ``(n1, d)`` (and ``X2``).

        From ``grid_bounds`` if given, else from the inputs' range plus a 5 % margin per
        side.
        """
        d = X1.shape[1]
        if self.dim is not None and d != self.dim:
            raise ValueError(f"X1 has {d} input dimensions but the grid has {self.dim}")
        sizes = self._sizes_for(d)
        if len(sizes) != d:
            raise ValueError(f"grid_size has {len(sizes)} entries but the inputs have d = {d}")
        _check_dim(d, sizes)
        if self.grid_bounds is not None:
            return Grid.covering(self.grid_bounds, sizes)
        return Grid.covering(_data_bounds(X1 if X2 is None else torch.cat([X1, X2])), sizes)

    def bind(self, X: torch.Tensor) -> GridInterpolation:
        """A copy whose grid covers ``X`` (the kernel itself if ``grid_bounds`` is set).

        The copy shares ``base_kernel`` (and so its parameters). Models call it in
        ``fit``: training, cross-covariances and predictions then use one grid, and a
        test point outside it is refused by name.
        """
        if self.grid_bounds is not None:
            return self
        X, _ = self.check_inputs(X)
        grid = self.grid(X)
        bounds = [grid.interior(j) for j in range(grid.dim)]
        return GridInterpolation(self.base_kernel, grid.sizes, grid_bounds=bounds)

    # ------------------------------------------------------- grid kernel values
    def _offset_kernel(self, grid: Grid, offsets: torch.Tensor, dtype, device) -> torch.Tensor:
        """``k(u_a, u_b)`` for integer grid offsets ``|a − b|`` of shape ``(..., d)``."""
        h = torch.tensor(grid.spacing, dtype=dtype, device=device)
        base = self.base_kernel
        if not isinstance(base, StationaryKernel):
            return _at_lags(base, offsets.to(dtype) * h)
        ls = base.lengthscale.to(dtype=dtype, device=device)
        ls = ls.expand(grid.dim) if ls.ndim == 0 else ls
        z = offsets.to(dtype) * (h / ls)
        scale = base.outputscale.to(dtype=dtype, device=device)
        return scale * base.profile((z * z).sum(-1))

    def grid_matrix(
        self, grid: Grid, dtype: torch.dtype, device: torch.device | str
    ) -> LinearOperator:
        """``K_UU = k(U, U)`` on ``grid``, shape ``(m, m)``, with FFT products.

        A Kronecker product of ``d`` symmetric Toeplitz factors when the base kernel is
        separable (RBF), else one ``d``-level symmetric Toeplitz operator (Matérn,
        ``d ≥ 2``, and every stationary expression, whose first column is the kernel at
        the grid's lags): both exact, both differentiable in the hyperparameters.
        """
        base = self.base_kernel
        if not isinstance(base, StationaryKernel):
            axes = [grid.offsets(j, dtype, torch.device(device)) for j in range(grid.dim)]
            lags = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)
            return Toeplitz(_at_lags(base, lags), is_psd=True)
        scale = base.outputscale.to(dtype=dtype, device=device)
        ls = base.lengthscale.to(dtype=dtype, device=device)
        # squared scaled offsets i·h_j/ℓ_j per axis: every entry of K_UU is built from them
        z2 = []
        for j in range(grid.dim):
            z = grid.offsets(j, dtype, torch.device(device)) / (ls if ls.ndim == 0 else ls[j])
            z2.append(z * z)
        if grid.dim == 1 or not base.separable:
            # κ(Σ_j z_j²) on the (m₁, …, m_d) offset grid, by broadcasting the axes' squares
            r2 = z2[0]
            for a in z2[1:]:
                r2 = r2.unsqueeze(-1) + a
            return Toeplitz(scale * base.profile(r2), is_psd=True)
        columns = [base.profile(a) for a in z2]
        columns[0] = scale * columns[0]  # the outputscale once, on the first factor
        return Kronecker(*[Toeplitz(c, is_psd=True) for c in columns])

    def stencil_block(self, grid: Grid, dtype, device) -> torch.Tensor:
        """``K_UU`` between the ``4ᵈ`` points of one stencil, shape ``(4ᵈ, 4ᵈ)``."""
        s = torch.cartesian_prod(*[torch.arange(4, device=device)] * grid.dim)
        s = s.reshape(-1, grid.dim)
        return self._offset_kernel(grid, (s.unsqueeze(1) - s.unsqueeze(0)).abs(), dtype, device)

    def stencil_quadratic_form(
        self, grid: Grid, values: torch.Tensor, block: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``w_iᵀ K_UU w_i`` for interpolation weights ``values`` ``(n, 4ᵈ)``; shape ``(n,)``.

        Every stencil covers ``4`` consecutive grid points per dimension, so the block of
        ``K_UU`` it sees is the same for every point (:meth:`stencil_block`, passed as
        ``block`` when it is kept): ``O(16ᵈ)`` per point.
        """
        B = self.stencil_block(grid, values.dtype, values.device) if block is None else block
        return ((values @ B) * values).sum(-1)

    def grid_bilinear_rows(
        self,
        grid: Grid,
        idx1: torch.Tensor,
        val1: torch.Tensor,
        idx2: torch.Tensor,
        val2: torch.Tensor,
    ) -> torch.Tensor:
        """``w1_iᵀ K_UU w2_i`` for paired rows of two interpolations; shape ``(n,)``.

        ``O(n 16ᵈ)`` work, in row blocks of at most 2²⁶ offset entries.
        """
        n, s = idx1.shape
        rows = max(1, 2**26 // (s * s * grid.dim))
        out = []
        for r0 in range(0, n, rows):
            sl = slice(r0, min(n, r0 + rows))
            a = torch.stack(torch.unravel_index(idx1[sl], grid.sizes), dim=-1)  # (r, s, d)
            b = torch.stack(torch.unravel_index(idx2[sl], grid.sizes), dim=-1)
            K = self._offset_kernel(
                grid, (a.unsqueeze(2) - b.unsqueeze(1)).abs(), val1.dtype, val1.device
            )  # (r, s, s)
            out.append(torch.einsum("ns,nst,nt->n", val1[sl], K, val2[sl]))
        return torch.cat(out) if out else val1.new_zeros(0)

    # ------------------------------------------------------------ kernel protocol
    def check_inputs(
        self, X1: object, X2: object | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Validate inputs as the base kernel does, and their dimension against the grid."""
        X1, X2 = self.base_kernel.check_inputs(X1, X2)
        if self.dim is not None and X1.shape[1] != self.dim:
            raise ValueError(f"X1 has {X1.shape[1]} input dimensions but the grid has {self.dim}")
        if self.dim is None and X1.shape[1] > MAX_GRID_DIMS:
            _check_dim(X1.shape[1], self._sizes_for(X1.shape[1]))
        return X1, X2

    def linop(
        self,
        X1: torch.Tensor,
        X2: torch.Tensor | None = None,
        backend: str = "auto",
        **opts: Any,
    ) -> GridInterpolationMatrix:
        """``W₁ K_UU W₂ᵀ`` as a structured operator, shape ``(n1, n2)``.

        A :class:`~pnsolve.kernels.ski_matrix.GridInterpolationMatrix`; ``backend`` is
        checked and otherwise ignored; no other options are taken.
        """
        if backend == "distributed":
            raise ValueError(
                'backend="distributed" is not supported for GridInterpolation (SKI): its '
                "products cost O(n 4^d + m log m) in one process; distribute the base "
                "kernel's exact products instead"
            )
        if backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
        if opts:
            raise TypeError(f"GridInterpolation.linop takes no options {sorted(opts)}")
        X1, X2 = self.check_inputs(X1, X2)
        grid = self.grid(X1, X2)
        left = grid.interpolation(X1, "X1")
        right = None if X2 is None else grid.interpolation(X2, "X2")
        return GridInterpolationMatrix(self, grid, left, right)

    @full_float32
    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        """Dense ``W₁ K_UU W₂ᵀ``, shape ``(n1, n2)`` (a reference; differentiable)."""
        return self.linop(X1, X2).to_dense()

    @full_float32
    def diag(self, X: torch.Tensor) -> torch.Tensor:
        """``w(x_i)ᵀ K_UU w(x_i)`` for the rows of ``X`` ``(n, d)``; shape ``(n,)``."""
        X, _ = self.check_inputs(X)
        grid = self.grid(X)
        return self.stencil_quadratic_form(grid, grid.interpolation(X, "X").values)

    @full_float32
    def bilinear_backward(
        self,
        X: torch.Tensor,
        U: torch.Tensor,
        W: torch.Tensor,
        *,
        rows: int,
        row_range: tuple[int, int] | None = None,
        reduce: Callable[[list[torch.Tensor]], None] | None = None,
    ) -> None:
        """Add ``∇ Σ_c U[:, c]ᵀ W_X K_UU W_Xᵀ W[:, c]`` to the base kernel's ``.grad``.

        Through the grid: ``(W_Xᵀ U)ᵀ K_UU(θ) (W_Xᵀ W)``, one FFT product with autograd,
        ``O(n 4ᵈ k + m log m k)``; ``rows`` is not needed. ``row_range`` and ``reduce``
        (row ranges over processes) are refused: SKI runs in one process.
        """
        if row_range is not None or reduce is not None:
            raise ValueError("GridInterpolation.bilinear_backward takes no row_range or reduce")
        if not any(p.requires_grad for p in self.base_kernel.parameters()):
            return  # nothing to differentiate: the inputs get no gradient through SKI
        grid = self.grid(X)
        Wx = grid.interpolation(X.detach(), "X")
        left, right = Wx.rmatmat(U.detach()), Wx.rmatmat(W.detach())
        with torch.enable_grad():
            K = self.grid_matrix(grid, X.dtype, X.device)
            (left * (K @ right)).sum().backward()

    def extra_repr(self) -> str:
        """Grid size and bounds for the module's repr."""
        return f"grid_size={self._sizes}, grid_bounds={self.grid_bounds}"


def _at_lags(kernel: Kernel, lags: torch.Tensor) -> torch.Tensor:
    """``k(τ, 0)`` of a stationary kernel for lags ``τ`` of shape ``(..., d)``, differentiable."""
    flat = lags.reshape(-1, lags.shape[-1])
    return kernel._paired(flat, torch.zeros_like(flat)).reshape(lags.shape[:-1])


def _reads_columns(kernel: Kernel) -> bool:
    """Whether the kernel or one of its parts has ``active_dims``."""
    return any(getattr(m, "active_dims", None) is not None for m in kernel.modules())
