"""The exponent floor of the tile code: ``exp`` never produces a subnormal or zero (private).

torch's CPU ``exp`` leaves its fast vectorised path for arguments below
``log(finfo.tiny)`` (about −87.34 in float32, −708.40 in float64), whose results are
subnormal or zero: measured 20–50× slower per entry than ``exp`` of ordinary arguments
(benchmarks/bench_kernel_matrix.py), and subnormal tile entries then slow down the
``tile @ V`` product as well. A short lengthscale puts most tile entries there (an RBF
tile holds ``−r²/2``: float32 pairs more than ``r ≈ 13.2`` lengthscales apart).

Every tile whose values end in an ``exp`` (RBF, Matérn, rational quadratic, periodic,
spectral mixture, products fused into one ``exp``) therefore clamps its exponent to at
least :func:`exp_floor` before ``exp_``. The floor is ``log(tiny) + 1/64``, so

* ``exp(floor) = e^{1/64} · tiny ≈ 1.016 · tiny`` is a normal number: no tile entry the
  clamp touches is subnormal;
* an entry changes only where its exact value is below ``exp(floor)``, and then by less
  than ``exp(floor) < 1.02 · tiny`` (kernels whose ``exp`` factor multiplies a
  polynomial, Matérn, clamp the distance instead: see :class:`~pnsolve.kernels.Matern`).

That is far below any rounding error of a kernel entry of order one (``eps · k(x, x)``),
so tiles agree with the unclamped kernel to rounding.

**float64 is not floored** (:func:`exp_floor` is ``−inf``, no clamp pass): its cliff,
``r > 37.6`` lengthscales for the RBF, is rarely met, and the float64 contract
(tests/kernels/test_hyperparameter_precision.py) asks entries to match the closed form
to ``tol · max(|k|, 1e-300)``, i.e. to ``~1e-310`` absolutely, which ``exp(floor) ≈
2.3e-308`` would break. Flooring it is one line (:data:`_FLOORED`) once that contract
allows ``finfo.tiny`` absolute errors.
"""

from __future__ import annotations

import functools
import math

import torch

__all__ = ["clamped_exp_", "exp_floor"]

#: Margin above ``log(tiny)``: keeps ``exp(floor)`` normal despite rounding of the
#: argument and of ``exp`` itself (a relative ``2^-6`` is thousands of ulps).
_MARGIN = 1.0 / 64.0


#: The dtypes whose tiles clamp their exponents (see the module docstring on float64).
_FLOORED = (torch.float32, torch.float16, torch.bfloat16)


@functools.cache
def exp_floor(dtype: torch.dtype) -> float:
    """Smallest exponent the tile code hands to ``exp``: ``log(finfo(dtype).tiny) + 1/64``.

    ``−inf`` (no floor) for dtypes outside :data:`_FLOORED` (float64).

    Parameters
    ----------
    dtype
        A floating dtype (float16/bfloat16 included).

    Returns
    -------
    float
        About −87.32 for float32; ``−inf`` for float64.
    """
    if dtype not in _FLOORED:
        return -math.inf
    return math.log(torch.finfo(dtype).tiny) + _MARGIN


def clamped_exp_(s: torch.Tensor) -> torch.Tensor:
    """In place ``s ← exp(max(s, exp_floor))`` (no autograd); returns ``s``.

    Parameters
    ----------
    s
        Exponents, any shape; overwritten by their ``exp`` (every entry ``≥ finfo.tiny``
        where the dtype is floored).
    """
    floor = exp_floor(s.dtype)
    return (s if floor == -math.inf else s.clamp_min_(floor)).exp_()
