"""Conversion to and from scikit-learn kernel expressions.

:func:`~pnsolve.kernels.from_sklearn` turns a kernel of
``sklearn.gaussian_process.kernels`` (sums, products and integer powers of the supported
families) into the pnsolve kernel with the same values;
:func:`~pnsolve.kernels.to_sklearn` (also :meth:`Kernel.to_sklearn
<pnsolve.kernels.Kernel.to_sklearn>`) goes back. scikit-learn is an optional
dependency: it is imported when one of them is called.

Mapping (scikit-learn ↔ pnsolve)::

    RBF(ℓ)                       ↔ RBF(ℓ)              (array ℓ: ARD)
    Matern(ℓ, nu)                ↔ Matern(nu, ℓ)       (nu ∈ {0.5, 1.5, 2.5}; nu=inf → RBF)
    RationalQuadratic(ℓ, α)      ↔ RationalQuadratic(ℓ, α)
    ExpSineSquared(ℓ, p)         ↔ Periodic(ℓ, p)      (equal for one-dimensional inputs)
    DotProduct(σ₀)               → Linear(1) + Constant(σ₀²)
    DotProduct(0, fixed)         ↔ Linear(1)
    DotProduct(σ₀) ** q          ↔ Polynomial(q, σ₀²)
    ConstantKernel(c)            ↔ Constant(c)
    ConstantKernel(c) * RBF(ℓ)   ↔ RBF(ℓ, outputscale=c)   (also Matern, RQ, Linear)
    ConstantKernel(c, fixed) * k ← Scale(k, c)  (c * k)
    WhiteKernel(s)               ↔ White(s)
    k1 + k2, k1 * k2             ↔ Sum, Product
    k ** q  (integer q ≥ 1)      → Product of one converted kernel repeated q times
"""

from __future__ import annotations

import functools
import math
import numbers
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

__all__ = ["from_sklearn"]

_SUPPORTED_SKLEARN = (
    "RBF, Matern (nu 0.5, 1.5, 2.5 or inf), RationalQuadratic, ExpSineSquared, DotProduct, "
    "ConstantKernel, WhiteKernel, and their sums, products and positive integer powers"
)


def _sklearn_kernels() -> Any:
    """``sklearn.gaussian_process.kernels``, or an ImportError saying how to install it."""
    try:
        from sklearn.gaussian_process import kernels
    except ImportError as err:
        raise ImportError(
            "converting kernels to or from scikit-learn needs scikit-learn, an optional "
            "dependency of pnsolve: pip install scikit-learn"
        ) from err
    return kernels


# --------------------------------------------------------------------------- from_sklearn
def from_sklearn(kernel: Any, *, input_dim: int | None = None) -> Kernel:
    """The pnsolve kernel equal to a scikit-learn kernel expression.

    Converts kernels of ``sklearn.gaussian_process.kernels``: ``RBF`` (a scalar or an
    array ``length_scale``: ARD), ``Matern`` (``nu`` 0.5, 1.5, 2.5; ``nu=inf`` is the
    RBF), ``RationalQuadratic``, ``ExpSineSquared`` (→
    :class:`~pnsolve.kernels.Periodic`), ``DotProduct`` (→ ``Linear(1.0) +
    Constant(sigma_0**2)``; ``DotProduct ** q`` → ``Polynomial(q, sigma_0**2)``),
    ``ConstantKernel`` (→ :class:`~pnsolve.kernels.Constant`), ``WhiteKernel`` (→
    :class:`~pnsolve.kernels.White`), and their sums, products and powers by a positive
    integer. Kernel values equal scikit-learn's to rounding (float64).

    Parameters
    ----------
    kernel
        A scikit-learn kernel expression.
    input_dim
        The number of input columns the kernel will see, if known. With
        ``input_dim > 1`` an ``ExpSineSquared`` part is refused (see Notes); by default
        it is converted, which is exact for one-dimensional inputs only.

    Returns
    -------
    Kernel
        The equivalent pnsolve kernel (float64 parameters on torch's default device).

    Raises
    ------
    ImportError
        If scikit-learn is not installed.
    TypeError
        For a kernel class without a pnsolve equivalent (``PairwiseKernel``,
        ``CompoundKernel``, subclasses of the supported classes, other objects), naming
        the class and what is supported.
    ValueError
        For unsupported parameter values, naming the class and the parameter: a
        ``Matern`` ``nu`` other than 0.5, 1.5, 2.5 or inf, a non-integer or
        non-positive exponent, a non-positive value where pnsolve needs a positive one
        (``ConstantKernel(0)``, ``WhiteKernel(0)``, ``DotProduct(sigma_0=0)`` with a
        learned ``sigma_0``), an array ``length_scale`` where scikit-learn has a scalar,
        or ``ExpSineSquared`` with ``input_dim > 1``.

    Notes
    -----
    **Learned parameters.** The converted kernel learns what scikit-learn learns: a
    parameter whose bounds are ``"fixed"`` gets ``requires_grad = False``, and so do
    the parameters pnsolve has but scikit-learn does not. A stationary kernel's
    ``outputscale`` takes the value of a ``ConstantKernel`` it is multiplied by (either
    order; one constant per stationary kernel), and is otherwise fixed at 1; likewise
    the variance of :class:`~pnsolve.kernels.Linear`. So ``2.0 * RBF(1.0)`` becomes
    ``RBF(lengthscale=1.0, outputscale=2.0)`` with two learned parameters, as in
    scikit-learn, and a bare ``RBF(1.0)`` one learned lengthscale (outputscale 1,
    fixed). Other bounds are not carried over: pnsolve's parameters are positive
    through a softplus and have no box constraints.

    **Powers.** ``k ** q`` becomes a :class:`~pnsolve.kernels.Product` of one converted
    kernel repeated ``q`` times (one module: ``parameters()`` lists its parameters once,
    so they are shared as in scikit-learn), except ``DotProduct ** q``, which becomes
    :class:`~pnsolve.kernels.Polynomial`.

    **Periodic kernels.** scikit-learn's ``ExpSineSquared`` applies the sine to the
    Euclidean distance, ``exp(−2 sin²(π ‖x − x'‖ / p) / ℓ²)``; pnsolve's
    :class:`~pnsolve.kernels.Periodic` sums over the dimensions,
    ``exp(−2 Σ_j sin²(π (x_j − x'_j) / p) / ℓ²)`` (positive semi-definite for every
    ``d``, which the Euclidean form is not). The two are equal for one-dimensional
    inputs only, and ``d`` is not known at conversion: pass ``input_dim`` to have the
    conversion refused for ``d > 1``.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> k = pn.kernels.from_sklearn(2.0 * RBF(length_scale=0.5) + WhiteKernel(0.1))
    >>> k
    (RBF(lengthscale=0.5, outputscale=2) + White(noise=0.1))
    >>> X = torch.zeros(2, 1, dtype=torch.float64)
    >>> k(X).detach()
    tensor([[2.1000, 2.0000],
            [2.0000, 2.1000]], dtype=torch.float64)
    >>> sum(p.numel() for p in k.parameters() if p.requires_grad)  # as in scikit-learn
    3
    """
    if input_dim is not None and (
        isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1
    ):
        raise ValueError(f"input_dim must be a positive int or None, got {input_dim!r}")
    skk = _sklearn_kernels()
    return _FromSklearn(skk, input_dim).convert(kernel)


class _FromSklearn:
    """One conversion: the scikit-learn module and the options."""

    def __init__(self, skk: Any, input_dim: int | None) -> None:
        self.skk = skk
        self.input_dim = input_dim

    def convert(self, k: Any) -> Kernel:
        skk = self.skk
        t = type(k)
        if t is skk.Sum:
            return Sum(self.convert(k.k1), self.convert(k.k2))
        if t is skk.Product:
            return self._product(self._factors(k))
        if t is skk.Exponentiation:
            return self._power(k)
        return self._leaf(k, None)

    # ------------------------------------------------------------------ products
    def _factors(self, k: Any) -> list[Any]:
        """The factors of nested scikit-learn products, in order."""
        if type(k) is self.skk.Product:
            return self._factors(k.k1) + self._factors(k.k2)
        return [k]

    def _scalable(self, k: Any) -> bool:
        """Whether a factor has a scale parameter fixed at 1 that a constant can take."""
        skk = self.skk
        t = type(k)
        if t in (skk.RBF, skk.Matern, skk.RationalQuadratic):
            return True
        return t is skk.DotProduct and _sigma_0(k) == 0.0 and _fixed(k, "sigma_0")

    def _product(self, factors: list[Any]) -> Kernel:
        """A product, each ``ConstantKernel`` folded into one scalable factor where possible."""
        skk = self.skk
        constants = [i for i, f in enumerate(factors) if type(f) is skk.ConstantKernel]
        scalable = [i for i, f in enumerate(factors) if self._scalable(f)]
        pairs = dict(zip(scalable, constants))  # factor index → its constant's index
        folded = set(pairs.values())
        parts: list[Kernel] = []
        for i, f in enumerate(factors):
            if i in folded:
                continue
            if i in pairs:
                c = factors[pairs[i]]
                scale = (
                    _positive(c.constant_value, c, "constant_value"),
                    _fixed(c, "constant_value"),
                )
                parts.append(self._leaf(f, scale))
            else:
                parts.append(self.convert(f))
        return parts[0] if len(parts) == 1 else Product(*parts)

    def _power(self, k: Any) -> Kernel:
        """``k ** q`` for a positive integer ``q``."""
        q = k.exponent
        ok = isinstance(q, numbers.Real) and not isinstance(q, bool) and math.isfinite(q)
        if not ok or q < 1 or q != int(q):
            raise ValueError(
                f"Exponentiation with exponent={q!r} has no pnsolve equivalent: pnsolve "
                "converts powers by a positive integer (k ** 2, k ** 3, ...)"
            )
        q = int(q)
        base = k.kernel
        if type(base) is self.skk.DotProduct and _sigma_0(base) > 0.0:
            offset = _sigma_0(base) ** 2
            poly = Polynomial(q, offset)
            _freeze(poly, "offset", _fixed(base, "sigma_0"))
            return poly
        kernel = self.convert(base)
        return kernel if q == 1 else Product(*([kernel] * q))

    # -------------------------------------------------------------------- leaves
    def _leaf(self, k: Any, scale: tuple[float, bool] | None) -> Kernel:
        """One family; ``scale = (value, fixed)`` of a folded ``ConstantKernel``."""
        skk = self.skk
        t = type(k)
        c, c_fixed = (1.0, True) if scale is None else scale
        if t is skk.RBF or (t is skk.Matern and k.nu == math.inf):
            return self._stationary(RBF, k, c, c_fixed)
        if t is skk.Matern:
            if k.nu not in (0.5, 1.5, 2.5):
                raise ValueError(
                    f"Matern with nu={k.nu!r} has no pnsolve equivalent: pnsolve's Matern "
                    "has nu 0.5, 1.5 or 2.5 (and nu=inf is the RBF)"
                )
            return self._stationary(functools.partial(Matern, float(k.nu)), k, c, c_fixed)
        if t is skk.RationalQuadratic:
            alpha = _positive(k.alpha, k, "alpha")
            kernel = self._stationary(
                functools.partial(RationalQuadratic, alpha=alpha), k, c, c_fixed, scalar=True
            )
            assert isinstance(kernel, RationalQuadratic)
            _freeze(kernel, "alpha", _fixed(k, "alpha"))
            return kernel
        if t is skk.ExpSineSquared:
            if self.input_dim is not None and self.input_dim > 1:
                raise ValueError(
                    f"ExpSineSquared with input_dim={self.input_dim}: scikit-learn applies the "
                    "sine to the Euclidean distance, pnsolve's Periodic sums over the "
                    "dimensions; the two are equal for one-dimensional inputs only"
                )
            periodic = Periodic(
                lengthscale=_positive_scalar(k.length_scale, k, "length_scale"),
                period=_positive_scalar(k.periodicity, k, "periodicity"),
            )
            _freeze(periodic, "lengthscale", _fixed(k, "length_scale"))
            _freeze(periodic, "period", _fixed(k, "periodicity"))
            return periodic
        if t is skk.DotProduct:
            return self._dot_product(k, c, c_fixed)
        if t is skk.ConstantKernel:
            constant = Constant(_positive(k.constant_value, k, "constant_value"))
            _freeze(constant, "value", _fixed(k, "constant_value"))
            return constant
        if t is skk.WhiteKernel:
            white = White(_positive(k.noise_level, k, "noise_level"))
            _freeze(white, "noise", _fixed(k, "noise_level"))
            return white
        raise TypeError(
            f"{_name(k)} has no pnsolve equivalent: from_sklearn converts {_SUPPORTED_SKLEARN}"
        )

    def _stationary(
        self, family: Any, k: Any, c: float, c_fixed: bool, *, scalar: bool = False
    ) -> Kernel:
        """A stationary family from ``k.length_scale`` with outputscale ``c``."""
        ls = _length_scale(k, scalar)
        kernel = family(lengthscale=ls, outputscale=c)
        assert isinstance(kernel, StationaryKernel)
        _freeze(kernel, "lengthscale", _fixed(k, "length_scale"))
        _freeze(kernel, "outputscale", c_fixed)
        return kernel

    def _dot_product(self, k: Any, c: float, c_fixed: bool) -> Kernel:
        """``xᵀx' + sigma_0²``: ``Linear + Constant``, or ``Linear`` alone for ``sigma_0 = 0``."""
        s0 = _sigma_0(k)
        if s0 == 0.0:
            if not _fixed(k, "sigma_0"):
                raise ValueError(
                    "DotProduct with sigma_0=0 and a learned sigma_0 has no pnsolve "
                    "equivalent (pnsolve learns positive values, scikit-learn learns "
                    "log(sigma_0) = -inf here): give a positive sigma_0, or "
                    "sigma_0_bounds='fixed' for the plain dot product (pnsolve's Linear)"
                )
            linear = Linear(c)
            _freeze(linear, "variance", c_fixed)
            return linear
        linear = Linear(1.0)
        _freeze(linear, "variance", True)
        constant = Constant(s0**2)
        _freeze(constant, "value", _fixed(k, "sigma_0"))
        return Sum(linear, constant)


def _name(k: Any) -> str:
    """``type(k).__name__`` with the module of a class from outside scikit-learn's kernels."""
    t = type(k)
    if t.__module__ == "sklearn.gaussian_process.kernels":
        return t.__name__
    return f"{t.__module__}.{t.__qualname__}"


def _fixed(k: Any, name: str) -> bool:
    """Whether the hyperparameter ``name`` of ``k`` has bounds ``"fixed"``."""
    return bool(getattr(k, f"hyperparameter_{name}").fixed)


def _raw(k: Kernel, name: str) -> torch.nn.Parameter:
    """The stored parameter ``raw_<name>`` of a pnsolve kernel."""
    p = getattr(k, f"raw_{name}")
    assert isinstance(p, torch.nn.Parameter)
    return p


def _freeze(k: Kernel, name: str, fixed: bool) -> None:
    """Turn off the gradient of ``raw_<name>`` if scikit-learn does not learn it."""
    if fixed:
        _raw(k, name).requires_grad_(False)


def _positive(value: Any, k: Any, name: str) -> float:
    """A positive finite scalar hyperparameter as a float, else a ValueError naming it."""
    import numpy as np

    arr = np.asarray(value, dtype=np.float64)
    if arr.size != 1:
        raise ValueError(f"{_name(k)} {name} must be a scalar, got {value!r}")
    v = float(arr.reshape(()))
    if not math.isfinite(v) or v <= 0.0:
        raise ValueError(
            f"{_name(k)} with {name}={v!r} has no pnsolve equivalent: pnsolve needs a "
            f"positive finite {name}"
        )
    return v


def _positive_scalar(value: Any, k: Any, name: str) -> float:
    """Like :func:`_positive`, with a message for array values."""
    import numpy as np

    if np.asarray(value).size != 1:
        raise ValueError(
            f"{_name(k)} with an array {name} has no pnsolve equivalent: scikit-learn's "
            f"{_name(k)} has a scalar {name}"
        )
    return _positive(value, k, name)


def _length_scale(k: Any, scalar: bool) -> float | torch.Tensor:
    """``k.length_scale`` as a float, or a float64 ``(d,)`` tensor (ARD)."""
    import numpy as np

    arr = np.asarray(k.length_scale, dtype=np.float64)
    if arr.size == 1:  # scikit-learn treats a one-element array as isotropic
        return _positive(arr, k, "length_scale")
    if scalar:
        return _positive_scalar(arr, k, "length_scale")
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise ValueError(
            f"{_name(k)} length_scale must be positive and finite, a scalar or of shape "
            f"(d,), got {k.length_scale!r}"
        )
    return torch.tensor(arr, dtype=torch.float64, device=torch.get_default_device())


def _sigma_0(k: Any) -> float:
    """``DotProduct.sigma_0`` as a non-negative float (else a ValueError naming it)."""
    import numpy as np

    arr = np.asarray(k.sigma_0, dtype=np.float64)
    v = float(arr.reshape(())) if arr.size == 1 else math.nan
    if not math.isfinite(v) or v < 0.0:
        raise ValueError(
            f"DotProduct with sigma_0={k.sigma_0!r} has no pnsolve equivalent: pnsolve "
            "needs a scalar sigma_0 ≥ 0"
        )
    return v
