"""pnsolve kernels as scikit-learn kernel expressions: :func:`to_sklearn`."""

from __future__ import annotations

import functools
import operator
from typing import Any

import torch

from .base import StationaryKernel
from .composite import Product, Sum
from .constant import Constant, White
from .kernel import Kernel
from .linear import Linear, Polynomial
from .matern import Matern
from .periodic import Periodic
from .rational_quadratic import RationalQuadratic
from .rbf import RBF
from .scale import Scale
from .sklearn_interop import _raw, _sklearn_kernels

__all__ = ["to_sklearn"]

#: scikit-learn's default hyperparameter bounds (widened to include a value outside them).
_DEFAULT_BOUNDS = (1e-5, 1e5)

_SUPPORTED_PNSOLVE = (
    "RBF, Matern, RationalQuadratic, Periodic, Linear, Polynomial, Constant, White, and "
    "their sums, products and scales"
)


def to_sklearn(kernel: Kernel) -> Any:
    """The scikit-learn kernel expression equal to a pnsolve kernel.

    Sums become ``+``, products ``*``, ``Scale`` (``c * k``) becomes
    ``ConstantKernel(c, constant_value_bounds="fixed") * k``. A stationary kernel with
    ``outputscale`` other than 1 becomes ``ConstantKernel(outputscale) * k`` (one with
    outputscale 1 stays bare); :class:`~pnsolve.kernels.Linear` ``(v)`` becomes
    ``ConstantKernel(v) * DotProduct(sigma_0=0, sigma_0_bounds="fixed")`` (bare for
    ``v = 1``); :class:`~pnsolve.kernels.Polynomial` ``(q, c)`` becomes
    ``DotProduct(sigma_0=√c) ** q``; :class:`~pnsolve.kernels.Periodic` becomes
    ``ExpSineSquared``; :class:`~pnsolve.kernels.Constant` ``ConstantKernel``;
    :class:`~pnsolve.kernels.White` ``WhiteKernel``. ``from_sklearn(to_sklearn(k))`` has
    the values of ``k``.

    Parameters
    ----------
    kernel
        A pnsolve kernel.

    Returns
    -------
    sklearn.gaussian_process.kernels.Kernel
        The equivalent scikit-learn kernel. A parameter with ``requires_grad = False``
        gets bounds ``"fixed"``; the others scikit-learn's default bounds
        ``(1e-5, 1e5)``, widened to include the value.

    Raises
    ------
    ImportError
        If scikit-learn is not installed.
    TypeError
        For a kernel without a scikit-learn equivalent (:class:`~pnsolve.kernels.Cosine`,
        :class:`~pnsolve.kernels.SpectralMixture`,
        :class:`~pnsolve.kernels.GridInterpolation`, other classes), naming it.
    ValueError
        For settings scikit-learn kernels cannot express, naming the kernel and the
        setting: ``active_dims`` (scikit-learn kernels read every column), a vector
        lengthscale or period of :class:`~pnsolve.kernels.Periodic`, an ARD lengthscale
        of :class:`~pnsolve.kernels.RationalQuadratic`.

    Notes
    -----
    :class:`~pnsolve.kernels.Periodic` and ``ExpSineSquared`` are equal for
    one-dimensional inputs only (see :func:`~pnsolve.kernels.from_sklearn`); ``d`` is not
    known here, so the conversion cannot check it. The value 1 of a learned outputscale
    (or ``Linear`` variance) is dropped with the ``ConstantKernel``, so scikit-learn then
    does not learn it.

    Examples
    --------
    >>> import pnsolve as pn
    >>> k = pn.kernels.RBF(lengthscale=0.5, outputscale=2.0) + pn.kernels.White(0.1)
    >>> pn.kernels.to_sklearn(k)
    1.41**2 * RBF(length_scale=0.5) + WhiteKernel(noise_level=0.1)
    >>> pn.kernels.Polynomial(degree=2, offset=4.0).to_sklearn()
    DotProduct(sigma_0=2) ** 2
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"to_sklearn converts a pnsolve kernel, got {type(kernel).__name__}")
    return _to_sklearn(kernel, _sklearn_kernels())


def _to_sklearn(k: Kernel, skk: Any) -> Any:
    t = type(k)
    if t is Sum:
        assert isinstance(k, Sum)
        return functools.reduce(operator.add, [_to_sklearn(p, skk) for p in k.parts])
    if t is Product:
        assert isinstance(k, Product)
        return functools.reduce(operator.mul, [_to_sklearn(p, skk) for p in k.parts])
    if t is Scale:
        assert isinstance(k, Scale)
        c = skk.ConstantKernel(float(k.scale), constant_value_bounds="fixed")
        return c * _to_sklearn(k.base_kernel, skk)
    known = (RBF, Matern, RationalQuadratic, Periodic, Linear, Polynomial, Constant, White)
    if t not in known:
        raise TypeError(
            f"{t.__name__} has no scikit-learn equivalent: to_sklearn converts {_SUPPORTED_PNSOLVE}"
        )
    dims = getattr(k, "active_dims", None)
    if dims is not None:
        raise ValueError(
            f"{t.__name__} with active_dims={list(dims)} has no scikit-learn "
            "equivalent: scikit-learn kernels read every input column"
        )
    with torch.no_grad():
        if isinstance(k, StationaryKernel):
            return _stationary_to_sklearn(k, skk)
        if isinstance(k, Periodic):
            ls, period = k.lengthscale, k.period
            if ls.ndim != 0 or period.ndim != 0:
                raise ValueError(
                    "Periodic with a vector lengthscale or period has no scikit-learn "
                    "equivalent: ExpSineSquared has a scalar length_scale and periodicity"
                )
            return skk.ExpSineSquared(
                length_scale=float(ls),
                periodicity=float(period),
                length_scale_bounds=_bounds(k, "lengthscale", ls),
                periodicity_bounds=_bounds(k, "period", period),
            )
        if isinstance(k, Linear):
            dot = skk.DotProduct(sigma_0=0.0, sigma_0_bounds="fixed")
            return _scaled(dot, k, "variance", k.variance, skk)
        if isinstance(k, Polynomial):
            s0 = k.offset.sqrt()
            dot = skk.DotProduct(sigma_0=float(s0), sigma_0_bounds=_bounds(k, "offset", s0))
            return dot if k.degree == 1 else dot**k.degree
        if isinstance(k, Constant):
            return skk.ConstantKernel(
                constant_value=float(k.value),
                constant_value_bounds=_bounds(k, "value", k.value),
            )
        assert isinstance(k, White)
        return skk.WhiteKernel(
            noise_level=float(k.noise), noise_level_bounds=_bounds(k, "noise", k.noise)
        )


def _stationary_to_sklearn(k: StationaryKernel, skk: Any) -> Any:
    """RBF, Matern or RationalQuadratic, times a ``ConstantKernel`` for the outputscale."""
    ls = k.lengthscale
    length_scale: float | Any = float(ls) if ls.ndim == 0 else ls.cpu().numpy().copy()
    ls_bounds = _bounds(k, "lengthscale", ls)
    if isinstance(k, RationalQuadratic):
        if ls.ndim != 0:
            raise ValueError(
                "RationalQuadratic with ARD lengthscales has no scikit-learn equivalent: "
                "scikit-learn's RationalQuadratic has a scalar length_scale"
            )
        base = skk.RationalQuadratic(
            length_scale=length_scale,
            alpha=float(k.alpha),
            length_scale_bounds=ls_bounds,
            alpha_bounds=_bounds(k, "alpha", k.alpha),
        )
    elif isinstance(k, Matern):
        base = skk.Matern(length_scale=length_scale, nu=k.nu, length_scale_bounds=ls_bounds)
    else:
        base = skk.RBF(length_scale=length_scale, length_scale_bounds=ls_bounds)
    return _scaled(base, k, "outputscale", k.outputscale, skk)


def _scaled(base: Any, k: Kernel, name: str, scale: torch.Tensor, skk: Any) -> Any:
    """``ConstantKernel(scale) * base``, or ``base`` for a scale of 1 (to rounding)."""
    if abs(float(scale) - 1.0) <= 4 * torch.finfo(torch.float64).eps:
        return base
    bounds = _bounds(k, name, scale)
    return skk.ConstantKernel(constant_value=float(scale), constant_value_bounds=bounds) * base


def _bounds(k: Kernel, name: str, value: torch.Tensor) -> Any:
    """``"fixed"`` if ``raw_<name>`` has no gradient; else default bounds containing ``value``."""
    if not _raw(k, name).requires_grad:
        return "fixed"
    lo, hi = float(value.min()), float(value.max())
    return (min(_DEFAULT_BOUNDS[0], lo), max(_DEFAULT_BOUNDS[1], hi))
