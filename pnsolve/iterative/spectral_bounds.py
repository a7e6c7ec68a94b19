"""Eigenvalue intervals of an SPD operator from the operator alone (never from ``b``)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .._core import random as rnd
from .._core.errors import NotPositiveDefiniteError
from .._core.validation import check_positive_int
from ..krylov.lanczos_process import lanczos
from ..linops.base import LinearOperator
from ..linops.checks import as_square_operator
from ..linops.closure import Closure

__all__ = ["SpectralBounds", "check_positive_diagonal", "spectral_bounds"]

_METHODS = ("lanczos", "gershgorin")
#: Default factor on the largest Ritz value (``θ_max ≤ λ_max``: the margin that makes it
#: an upper bound in practice).
SAFETY = 1.1


class SpectralBounds(NamedTuple):
    """An interval ``[lower, upper]`` for the spectrum; unpacks as ``lower, upper, products``.

    Attributes
    ----------
    lower
        ``"lanczos"``: the smallest Ritz value, ``≥ λ_min`` (an estimate from above,
        which is the safe side for Chebyshev and damping). ``"gershgorin"``: a
        guaranteed lower bound, clipped at ``0``.
    upper
        ``"lanczos"``: ``safety`` times the largest Ritz value (``θ_max ≤ λ_max``, so
        the factor is what makes it an upper bound in practice). ``"gershgorin"``: the
        largest absolute row sum, a guaranteed upper bound.
    products
        Cost: products with ``A`` (Lanczos steps), or ``1`` for Gershgorin's pass over
        the rows.
    """

    lower: float
    upper: float
    products: int


def spectral_bounds(
    A: object,
    *,
    method: str = "lanczos",
    steps: int = 10,
    jacobi: bool = False,
    safety: float = SAFETY,
) -> SpectralBounds:
    """Eigenvalue interval of ``A`` (or of ``D^{-1/2} A D^{-1/2}`` with ``jacobi=True``).

    Used to set the damping of :class:`~pnsolve.iterative.JacobiIteration` and
    :class:`~pnsolve.iterative.Richardson` and the interval of
    :class:`~pnsolve.iterative.Chebyshev`. It reads ``A`` only, so the methods stay
    affine (``x_m = P_m b`` with ``P_m`` independent of ``b``).

    Parameters
    ----------
    A
        Symmetric positive definite operator, shape ``(n, n)``.
    method
        ``"lanczos"`` (default): ``steps`` Lanczos steps with full reorthogonalisation
        from a fixed start vector (standard normal draws of a generator seeded with 0 —
        deterministic and independent of ``b``). ``"gershgorin"``: Gershgorin discs,
        one pass over the rows (needs ``row_block``).
    steps
        Lanczos steps (products with ``A``), capped at ``n``.
    jacobi
        Bound ``D^{-1/2} A D^{-1/2}`` (``D = diag A``) instead: the spectrum of
        ``D⁻¹A``, which Jacobi iterates with.
    safety
        ``"lanczos"``: factor ``≥ 1`` on the largest Ritz value.

    Returns
    -------
    SpectralBounds
        ``(lower, upper, products)``.

    Raises
    ------
    NotPositiveDefiniteError
        If a Ritz value (``"lanczos"``) or a diagonal entry (``jacobi=True``) is not
        positive: ``A`` is not positive definite.
    """
    op = as_square_operator(A, "A")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    check_positive_int(steps, "steps")
    if isinstance(safety, bool) or not isinstance(safety, int | float) or not safety >= 1:
        raise ValueError(f"safety must be a number ≥ 1, got {safety!r}")
    with torch.no_grad():
        scale = _inverse_sqrt_diagonal(op) if jacobi else None
        if method == "gershgorin":
            return _gershgorin(op, scale)
        return _lanczos(op, scale, steps, float(safety))


def check_positive_diagonal(d: torch.Tensor, what: str, offset: int = 0) -> torch.Tensor:
    """Return ``d`` (a diagonal of ``A``) if it is positive; else name ``A`` and the entry.

    Raises
    ------
    NotPositiveDefiniteError
        At the first entry that is not positive (``offset`` is added to its index).
    """
    bad = ~(d > 0)
    if bool(bad.any()):
        j = int(bad.nonzero()[0, 0])
        raise NotPositiveDefiniteError(
            f"A is not positive definite: its diagonal entry A[{offset + j}, {offset + j}] = "
            f"{float(d[j]):.3g} is not positive ({what} divides by it)"
        )
    return d


def _inverse_sqrt_diagonal(A: LinearOperator) -> torch.Tensor:
    return check_positive_diagonal(A.diagonal(), "Jacobi scaling").rsqrt()


def _lanczos(
    A: LinearOperator, scale: torch.Tensor | None, steps: int, safety: float
) -> SpectralBounds:
    op = A
    if scale is not None:
        s = scale.unsqueeze(-1)
        op = Closure(
            lambda X: s * (A @ (s * X)),
            A.shape,
            dtype=A.dtype,
            device=A.device,
            is_symmetric=True,
        )
    g = torch.Generator(device="cpu").manual_seed(0)  # the same start vector on every device
    v = rnd.randn(A.shape[0], generator=g, dtype=torch.float64, device=A.device).to(A.dtype)
    result = lanczos(op, v, steps)
    theta = torch.linalg.eigvalsh(result.T.to(torch.float64))
    low, high = float(theta[0]), float(theta[-1])
    if not (low > 0 and math.isfinite(high)):
        raise NotPositiveDefiniteError(
            f"A is not positive definite: Lanczos found the Ritz value {low:.3g} ≤ 0"
        )
    return SpectralBounds(low, safety * high, result.Q.shape[1])


def _gershgorin(A: LinearOperator, scale: torch.Tensor | None) -> SpectralBounds:
    n = A.shape[0]
    b = max(1, min(n, (1 << 22) // max(n, 1)))  # row blocks of at most ~4M entries
    lower, upper = math.inf, 0.0
    for lo in range(0, n, b):
        hi = min(lo + b, n)
        rows = A.row_block(slice(lo, hi))
        if scale is not None:
            rows = scale[lo:hi].unsqueeze(-1) * rows * scale
        d = rows.diagonal(offset=lo)  # rows[i, lo + i]
        radius = rows.abs().sum(1) - d.abs()
        lower = min(lower, float((d - radius).min()))
        upper = max(upper, float((d + radius).max()))
    return SpectralBounds(max(lower, 0.0), upper, 1)
