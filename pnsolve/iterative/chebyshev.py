"""Chebyshev semi-iteration as an affine iterative method."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._core.errors import NotPositiveDefiniteError
from .._core.validation import check_positive_int
from ..linops.base import LinearOperator
from .affine import AffineMethod, Sweeper
from .divergence import DIVERGENCE_FACTOR, DivergenceError, ResidualWatch, growth_text
from .spectral_bounds import SAFETY, spectral_bounds

__all__ = ["Chebyshev"]


@dataclass(frozen=True)
class Chebyshev(AffineMethod):
    """Chebyshev semi-iterative method on an eigenvalue interval ``[lower, upper]`` of ``A``.

    After ``m`` steps the error is ``E_m = r_m(A)`` with the scaled Chebyshev
    polynomial ``r_m(λ) = T_m((u + l − 2λ)/(u − l)) / T_m((u + l)/(u − l))``, the
    polynomial with ``r_m(0) = 1`` smallest on ``[l, u]``; ``P_m = (I − r_m(A)) A⁻¹``
    is a polynomial in ``A`` (symmetric) and depends on ``A``, ``m`` and the interval,
    never on ``b``. Three-term recurrence (Saad, *Iterative Methods*, Alg. 12.1):
    ``θ = (u + l)/2``, ``δ = (u − l)/2``, ``σ = θ/δ``, ``ρ₀ = 1/σ``, ``d₀ = r₀/θ``;
    ``x += d``, ``r −= A d``, ``ρ' = 1/(2σ − ρ)``, ``d = ρ'ρ d + (2ρ'/δ) r``.

    Parameters
    ----------
    sweeps
        ``m ≥ 1`` steps.
    lower, upper
        The interval. ``None``: estimated from ``A`` alone by
        :func:`~pnsolve.iterative.spectral_bounds` (``lanczos_steps`` products):
        ``lower`` the smallest Ritz value, ``upper`` 1.1 × the largest. ``upper`` must
        not be below ``λ_max`` (eigenvalues above it are amplified); a ``lower`` above
        ``λ_min`` only slows the convergence of the smallest eigencomponents
        (``|r_m| < 1`` on ``(0, l]``). For ``K̂ = K + σ² I`` pass ``lower=σ²``.
    lanczos_steps
        Lanczos steps when a bound is estimated.

    Notes
    -----
    *Cost.* One product with ``A`` per step plus ``O(n)``; set-up ``lanczos_steps``
    products when a bound is estimated. Measured at ``n = 2000`` (float64, dense
    kernel matrix, 2 cores): a step about one CG iteration. Converges like
    ``2 ((√κ − 1)/(√κ + 1))^m`` with ``κ = u/l``, CG's rate, without inner products
    (and without depending on ``b``).
    """

    lower: float | None = None
    upper: float | None = None
    lanczos_steps: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("lower", "upper"):
            value = getattr(self, name)
            if value is None:
                continue
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not (number and 0 <= value < math.inf):
                raise ValueError(f"{name} must be a finite number ≥ 0 or None, got {value!r}")
        if self.lower is not None and self.upper is not None and not self.lower < self.upper:
            raise ValueError(f"lower must be below upper, got [{self.lower}, {self.upper}]")
        check_positive_int(self.lanczos_steps, "lanczos_steps")

    def _sweeper(self, A: LinearOperator) -> ChebyshevSweeper:
        lower, upper, products = self.lower, self.upper, 0
        if lower is None or upper is None:
            bounds = spectral_bounds(A, steps=self.lanczos_steps)
            products = bounds.products
            lower = bounds.lower if lower is None else lower
            upper = bounds.upper if upper is None else upper
            if not lower < upper:
                raise ValueError(
                    f"the estimated interval [{lower:.3g}, {upper:.3g}] is empty: pass lower "
                    "and upper"
                )
        return ChebyshevSweeper(self, A, float(lower), float(upper), products)


class ChebyshevSweeper(Sweeper):
    """The steps of :class:`Chebyshev` (one product each)."""

    products_per_sweep = 1
    symmetric = True

    def __init__(
        self,
        method: Chebyshev,
        A: LinearOperator,
        lower: float,
        upper: float,
        setup_products: int,
    ) -> None:
        self.method = method
        self.A = A
        self.lower, self.upper = lower, upper
        self.setup_products = setup_products

    def parameters(self) -> dict[str, float]:
        """The interval ``lower``, ``upper``."""
        return {"lower": self.lower, "upper": self.upper}

    def run(
        self, X: torch.Tensor, R: torch.Tensor, sweeps: int, transpose: bool, watch: ResidualWatch
    ) -> list[float]:
        """``sweeps`` Chebyshev steps from ``(X, R)`` (symmetric: ``transpose`` ignored).

        With ``upper ≥ λ_max`` the residual never grows (``|r_m| ≤ 1`` on ``(0, upper]``):
        the growth bound is 1.
        """
        theta = 0.5 * (self.upper + self.lower)
        delta = 0.5 * (self.upper - self.lower)
        sigma = theta / delta
        rho = 1.0 / sigma
        D = R / theta
        norms = []
        for step in range(sweeps):
            self.step(self.A, X, R, D)
            norms.append(watch.check(R, step + 1))
            if step + 1 < sweeps:
                rho_next = 1.0 / (2.0 * sigma - rho)
                D = (rho_next * rho) * D + (2.0 * rho_next / delta) * R
                rho = rho_next
        return norms

    def diverged(self, sweep: int, start: float, now: float) -> Exception:
        """Name ``upper`` and ``λ_max`` (from Lanczos, on the error path only)."""
        method = self.method
        try:
            with torch.no_grad():
                lam = spectral_bounds(self.A, steps=method.lanczos_steps, safety=SAFETY)
        except NotPositiveDefiniteError as err:
            return NotPositiveDefiniteError(
                f"Chebyshev diverges: {growth_text(start, now, sweep)}; {err}"
            )
        given = method.upper is not None
        what = (
            f"Chebyshev(upper={self.upper:.4g})"
            if given
            else f"Chebyshev's estimated interval [{self.lower:.3g}, {self.upper:.3g}]"
        )
        instead = "" if given else f" (raise lanczos_steps={method.lanczos_steps} or pass it)"
        return DivergenceError(
            f"{what} diverges: {growth_text(start, now, sweep)}, more than "
            f"{DIVERGENCE_FACTOR:g}× what a convergent run allows (eigenvalues above upper "
            f"are amplified); use upper ≥ λ_max(A) ≈ {lam.upper / SAFETY:.3g} (Lanczos), e.g. "
            f"upper={lam.upper:.3g}{instead}"
        )
