"""Damped Richardson and Jacobi iterations as affine iterative methods."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from .._core.deprecation import renamed_attributes
from .._core.errors import NotPositiveDefiniteError
from .._core.validation import check_positive_int
from ..linops.base import LinearOperator
from .affine import AffineMethod, Sweeper
from .divergence import DIVERGENCE_FACTOR, DivergenceError, ResidualWatch, growth_text
from .spectral_bounds import SAFETY, check_positive_diagonal, spectral_bounds

__all__ = ["JacobiIteration", "Richardson"]

_BOUNDS = ("lanczos", "gershgorin")


@dataclass(frozen=True)
class _Damped(AffineMethod):
    """``x ← x + ω S (b − A x)`` with ``S = I`` (Richardson) or ``S = D⁻¹`` (Jacobi)."""

    damping: float | None = None
    bound: str = "lanczos"
    lanczos_steps: int = 10

    jacobi: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.damping is not None:
            number = isinstance(self.damping, int | float) and not isinstance(self.damping, bool)
            if not (number and 0 < self.damping < math.inf):
                raise ValueError(f"damping must be a positive number or None, got {self.damping!r}")
        if self.bound not in _BOUNDS:
            raise ValueError(f"bound must be one of {_BOUNDS}, got {self.bound!r}")
        check_positive_int(self.lanczos_steps, "lanczos_steps")

    def _sweeper(self, A: LinearOperator) -> DampedSweeper:
        with torch.no_grad():
            scale = None
            if self.jacobi:
                d = check_positive_diagonal(A.diagonal(), "Jacobi")
                scale = d.reciprocal().unsqueeze(-1)
            if self.damping is not None:
                omega = float(self.damping)
                return DampedSweeper(self, A, omega, scale, 0, {"damping": omega})
            bounds = spectral_bounds(
                A, method=self.bound, steps=self.lanczos_steps, jacobi=self.jacobi
            )
        if self.bound == "lanczos":
            omega = 2.0 / (bounds.lower + bounds.upper)
        else:
            omega = 1.0 / bounds.upper
        params = {"damping": omega, "lower": bounds.lower, "upper": bounds.upper}
        return DampedSweeper(self, A, omega, scale, bounds.products, params)


@dataclass(frozen=True)
class Richardson(_Damped):
    """Damped Richardson iteration ``x ← x + ω (b − A x)``: the splitting ``M = I/ω``.

    ``P_m = ω Σ_{j<m} (I − ωA)^j`` is a polynomial in ``A`` (symmetric), and the
    error propagator ``(I − ωA)^m`` contracts when ``0 < ω < 2/λ_max``.

    Parameters
    ----------
    sweeps
        ``m ≥ 1``.
    damping
        ``ω``. ``None`` (default): from an eigenvalue interval ``[λ̲, λ̄]`` of ``A``
        computed from ``A`` alone (:func:`~pnsolve.iterative.spectral_bounds`):
        ``ω = 2/(λ̲ + λ̄)`` for ``bound="lanczos"`` (the minimiser of
        ``max |1 − ωλ|`` on the interval; ``λ̲`` is the smallest Ritz value, which can
        only overestimate ``λ_min`` and so keeps ``ω λ_max < 2`` whenever
        ``λ̄ ≥ λ_max``), ``ω = 1/λ̄`` for ``bound="gershgorin"`` (guaranteed
        convergence, ``0 < ωλ ≤ 1``).
    bound
        ``"lanczos"`` (default: ``lanczos_steps`` products at set-up, the largest Ritz
        value times 1.1) or ``"gershgorin"`` (one pass over the rows).
    lanczos_steps
        Lanczos steps for ``bound="lanczos"``.

    Notes
    -----
    *Cost.* One product with ``A`` per sweep (all columns at once) and ``O(n)``; set-up
    ``lanczos_steps`` products (``info.setup_products``). Measured at ``n = 2000``
    (float64, dense kernel matrix, 2 cores): a sweep about one CG iteration.

    *Convergence* is slow, ``1 − O(1/κ)`` per sweep; use :class:`Chebyshev` for
    ``1 − O(1/√κ)`` at the same cost.
    """


@dataclass(frozen=True)
class JacobiIteration(_Damped):
    """Damped Jacobi iteration ``x ← x + ω D⁻¹ (b − A x)``: the splitting ``M = D/ω``.

    Richardson on the diagonally scaled system: ``P_m = ω Σ_{j<m} (I − ωD⁻¹A)^j D⁻¹``
    is symmetric (``D^{-1/2} p(D^{-1/2} A D^{-1/2}) D^{-1/2}``). The damping comes from
    the spectrum of ``D^{-1/2} A D^{-1/2}`` as for :class:`Richardson` (undamped Jacobi,
    ``ω = 1``, diverges on many SPD matrices, e.g. most kernel matrices).

    Parameters
    ----------
    sweeps
        ``m ≥ 1``.
    damping
        ``ω``; ``None``: ``2/(λ̲ + λ̄)`` (``"lanczos"``) or ``1/λ̄`` (``"gershgorin"``)
        for the spectrum of ``D⁻¹A``, as in :class:`Richardson`.
    bound, lanczos_steps
        As in :class:`Richardson`.

    Notes
    -----
    *Cost.* One product with ``A`` per sweep plus ``O(n)``; ``diag A`` once (must be
    structured: a non-positive entry raises :class:`~pnsolve.NotPositiveDefiniteError`).
    On a kernel matrix (constant diagonal) Jacobi and Richardson coincide.
    """

    jacobi: ClassVar[bool] = True


class DampedSweeper(Sweeper):
    """The sweeps of :class:`Richardson` and :class:`JacobiIteration` (one product each).

    Convergent (``0 < ω λ < 2`` on the spectrum of ``S A``), the residual grows by at
    most ``√(max dᵢ/min dᵢ)`` for Jacobi (``S = D⁻¹``) and never for Richardson: that is
    its :attr:`growth_bound`.
    """

    products_per_sweep = 1
    symmetric = True

    def __init__(
        self,
        method: _Damped,
        A: LinearOperator,
        omega: float,
        scale: torch.Tensor | None,
        setup_products: int,
        params: dict[str, float],
    ) -> None:
        self.method = method
        self.A = A
        self.omega = omega
        self.factor = omega if scale is None else omega * scale
        self.setup_products = setup_products
        self._params = params
        if scale is not None:  # scale = D⁻¹: the residual's growth bound √(max d / min d)
            lo, hi = torch.stack(torch.aminmax(scale)).tolist() if scale.numel() else (1, 1)
            self.growth_bound = math.sqrt(hi / lo)

    def parameters(self) -> dict[str, float]:
        """``damping`` and, when estimated, the ``lower``/``upper`` spectral bounds."""
        return dict(self._params)

    def run(
        self, X: torch.Tensor, R: torch.Tensor, sweeps: int, transpose: bool, watch: ResidualWatch
    ) -> list[float]:
        """``X += ω S R``, ``R −= A ω S R``, ``sweeps`` times (symmetric: ``transpose`` ignored)."""
        norms = []
        for sweep in range(sweeps):
            self.step(self.A, X, R, self.factor * R)
            norms.append(watch.check(R, sweep + 1))
        return norms

    def diverged(self, sweep: int, start: float, now: float) -> Exception:
        """Name ``damping`` and the largest that converges (``2/λ_max``, from Lanczos)."""
        method, omega = self.method, self.omega
        name = type(method).__name__
        of = "D⁻¹A" if method.jacobi else "A"
        try:  # the error path only: 10 products to say which damping converges
            with torch.no_grad():
                lam = spectral_bounds(
                    self.A, steps=method.lanczos_steps, jacobi=method.jacobi, safety=SAFETY
                )
        except NotPositiveDefiniteError as err:
            return NotPositiveDefiniteError(
                f"{name}(damping={omega:.4g}) diverges: {growth_text(start, now, sweep)}; {err}"
            )
        given = method.damping is not None
        what = f"{name}(damping={omega:.4g})" if given else f"{name}'s damping {omega:.4g}"
        advice = "" if given else f" (bound={method.bound!r} underestimated λ_max)"
        return DivergenceError(
            f"{what} diverges: {growth_text(start, now, sweep)}, more than "
            f"{DIVERGENCE_FACTOR:g}× what a convergent run allows{advice}; use damping < "
            f"2/λ_max({of}) ≈ {2.0 * SAFETY / lam.upper:.3g} (Lanczos: λ_max ≈ "
            f"{lam.upper / SAFETY:.3g}), e.g. damping={2.0 / lam.upper:.3g}"
        )


#: ``Jacobi`` (renamed: the preconditioner pnsolve.preconditioners.Jacobi owns the name).
__getattr__ = renamed_attributes(__name__, {"Jacobi": "JacobiIteration"})
