"""Products in low precision for solvers whose recurrences stay in float64.

``precision="mixed"`` (``pn.cg``, the PLS, IterGP) multiplies with a float32 copy of
``A`` and converts the product back: the iterate, residuals, step sizes and beliefs stay
in float64, and the true residuals that confirm convergence use ``A`` itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from .._core.errors import MissingStructureError
from .._core.precision import ieee_float32
from ..linops.base import LinearOperator

__all__ = ["PRECISIONS", "LowPrecisionProducts", "check_precision", "low_precision_products"]

#: Values of the solvers' ``precision`` argument.
#:
#: ``"full"``: products in ``A``'s dtype. ``"mixed"``: IEEE float32 products.
#: ``"mixed-tf32"``: float32 products with TensorFloat-32 matmuls where the device has
#: them (CUDA, Ampere and later; IEEE float32 elsewhere). ``"mixed-bf16"``: bfloat16
#: products (8-bit mantissa: only for well-conditioned ``A``).
PRECISIONS = ("full", "mixed", "mixed-tf32", "mixed-bf16")

_LOW_DTYPE = {
    "mixed": torch.float32,
    "mixed-tf32": torch.float32,
    "mixed-bf16": torch.bfloat16,
}

#: Unit roundoff of a TF32 product (10-bit mantissa).
TF32_EPS = 2.0**-10


def check_precision(
    precision: object, name: str = "precision", allowed: tuple[str, ...] = PRECISIONS
) -> str:
    """Return ``precision`` if it is one of ``allowed``, else raise ``ValueError``."""
    if not isinstance(precision, str) or precision not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {precision!r}")
    return precision


class LowPrecisionProducts(LinearOperator):
    """``A`` whose products run in a lower precision: ``(A_low @ X.to(low)).to(dtype)``.

    The operator has ``A``'s dtype (float64 in, float64 out), so a solver's recurrences
    are unchanged; :attr:`eps` is the relative accuracy of one product, which the solvers
    use for their rounding bands and residual replacements.

    Parameters
    ----------
    A
        The full-precision operator (kept for its diagonal and row blocks, which are
        exact).
    precision
        ``"mixed"``, ``"mixed-tf32"`` or ``"mixed-bf16"``.
    """

    def __init__(self, A: LinearOperator, precision: str) -> None:
        low = _LOW_DTYPE[precision]
        super().__init__(A.shape, A.dtype, A.device, is_symmetric=A.is_symmetric, is_psd=A.is_psd)
        self.full = A
        self.low = A.to(low)
        self.precision = precision
        tf32 = precision == "mixed-tf32" and A.device.type == "cuda"
        self._tf32 = tf32
        #: Unit roundoff of one product.
        self.eps = TF32_EPS if tf32 else torch.finfo(low).eps

    def __repr__(self) -> str:
        return f"LowPrecisionProducts({self.full!r}, precision={self.precision!r})"

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        with _product_precision(self._tf32):
            return self.low._matmat(X.to(self.low.dtype)).to(X.dtype)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        with _product_precision(self._tf32):
            return self.low._rmatmat(X.to(self.low.dtype)).to(X.dtype)

    def _diagonal(self) -> torch.Tensor:
        return self.full._diagonal()

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        return self.full._row_block(rows)


def low_precision_products(
    A: LinearOperator, precision: str, name: str = "precision"
) -> LinearOperator:
    """The operator a solver multiplies with: ``A`` (``"full"``) or its low-precision form.

    Raises
    ------
    ValueError
        Naming ``name``: an unknown precision; ``A`` not float64 (the recurrences of a
        mixed-precision solve run in float64, the products in float32 or lower); ``A``
        cannot compute its products in another dtype (a :class:`~pnsolve.linops.Closure`).
    """
    precision = check_precision(precision, name)
    if precision == "full":
        return A
    if A.dtype != torch.float64:
        raise ValueError(
            f"{name}={precision!r} runs float64 recurrences with low-precision products of "
            f"a float64 A; A is {A.dtype} (use {name}='full', or give A and b in float64)"
        )
    try:
        return LowPrecisionProducts(A, precision)
    except MissingStructureError as err:
        raise ValueError(
            f"{name}={precision!r} needs an A that can compute its products in float32: {err}"
        ) from err


def product_eps(A: LinearOperator) -> float:
    """Unit roundoff of one product with ``A`` (its dtype's, or the low precision's)."""
    return A.eps if isinstance(A, LowPrecisionProducts) else torch.finfo(A.dtype).eps


def reliable_update_factor(eps: float, default: float) -> float:
    """Replacement factor for products with unit roundoff ``eps``: ``max(default, √eps)``.

    The gap between recursive and true residual grows by about ``eps · ‖r_max‖`` between
    replacements; replacing once the residual dropped by ``√eps`` keeps it below
    ``√eps · ‖r‖`` (van der Vorst & Ye 2000), which matters for bfloat16 products.
    """
    return max(default, math.sqrt(eps))


@contextmanager
def _product_precision(tf32: bool) -> Iterator[None]:
    """IEEE float32 matmuls, or TF32 on CUDA when asked (restored on exit)."""
    if not tf32:
        with ieee_float32():
            yield
        return
    matmul = torch.backends.cuda.matmul
    saved = matmul.fp32_precision
    matmul.fp32_precision = "tf32"
    try:
        yield
    finally:
        matmul.fp32_precision = saved
