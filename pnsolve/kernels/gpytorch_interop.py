"""Kernels from GPyTorch: native equivalents where they are exact, a wrapper otherwise.

:func:`~pnsolve.kernels.from_gpytorch` turns a ``gpytorch.kernels.Kernel`` expression
into the pnsolve kernel with the same values. Families with an exact pnsolve equivalent
become native pnsolve kernels (every backend: dense, fused ``"chunked"`` tiles,
``"keops"``, ``"distributed"``); any other kernel — a user's ``gpytorch.kernels.Kernel``
subclass, a family pnsolve does not have, settings pnsolve cannot express — becomes a
:class:`~pnsolve.kernels.GPyTorchKernel`, which evaluates it through GPyTorch itself
(dense and ``"chunked"`` backends). GPyTorch is an optional dependency: it is imported
when one of them is called.

Mapping (GPyTorch → pnsolve; ``c`` an outputscale, ``ℓ`` a lengthscale)::

    RBFKernel                        → RBF(ℓ)              (ARD (1, d) → (d,))
    MaternKernel(nu)                 → Matern(nu, ℓ)       (nu 0.5, 1.5, 2.5)
    RQKernel                         → RationalQuadratic(ℓ, α)
    PeriodicKernel(λ, p)             → Periodic(√λ, p)     (GPyTorch divides by λ, not λ²)
    LinearKernel(v)                  → Linear(v)           (ARD v: Σ_j Linear(v_j, active_dims=[j]))
    PolynomialKernel(q, offset)      → Polynomial(q, offset)   (integer q ≥ 1, offset > 0)
    CosineKernel(p)                  → Cosine(2p)          (one input column only)
    SpectralMixtureKernel (d = 1)    → SpectralMixture(Q, weights, means, scales²)
    ConstantKernel(c)                → Constant(c)
    ScaleKernel(RBF | Matern | RQ)   → the stationary kernel with outputscale=c
    ScaleKernel(k)                   → Constant(c) * k
    AdditiveKernel, k1 + k2          → Sum
    ProductKernel, k1 * k2           → Product
    anything else                    → GPyTorchKernel(k)   (exact: GPyTorch evaluates it)
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any

import torch

from .base import StationaryKernel
from .composite import Product, Sum
from .constant import Constant
from .gpytorch_kernel import GPyTorchKernel, _check_unbatched, _compose, _dims, _gpytorch
from .kernel import Kernel
from .linear import Linear, Polynomial
from .matern import Matern
from .periodic import Cosine, Periodic
from .rational_quadratic import RationalQuadratic
from .rbf import RBF
from .spectral_mixture import SpectralMixture

__all__ = ["from_gpytorch"]


def from_gpytorch(kernel: Any, *, input_dim: int | None = None) -> Kernel:
    """The pnsolve kernel equal to a GPyTorch kernel expression.

    Maps ``RBFKernel``, ``MaternKernel``, ``RQKernel``, ``PeriodicKernel``,
    ``LinearKernel``, ``PolynomialKernel``, ``CosineKernel``, ``SpectralMixtureKernel``,
    ``ConstantKernel``, ``ScaleKernel``, ``AdditiveKernel`` and ``ProductKernel`` (also
    written ``k1 + k2`` and ``k1 * k2``) to native pnsolve kernels where an exact
    equivalent exists (see the table in :mod:`pnsolve.kernels.gpytorch_interop`), so
    they run on every backend. Every other kernel of the expression — a subclass of a
    GPyTorch kernel or of ``gpytorch.kernels.Kernel``, a family pnsolve does not have,
    a setting pnsolve cannot express — becomes a :class:`GPyTorchKernel` that GPyTorch
    evaluates; its siblings in a sum or product stay native. Kernel values equal
    GPyTorch's to rounding (float64).

    Parameters
    ----------
    kernel
        A ``gpytorch.kernels.Kernel`` without ``batch_shape``.
    input_dim
        The number of input columns the kernel will see, if known. Only a
        ``CosineKernel`` uses it: GPyTorch's applies the cosine to the Euclidean distance
        and equals pnsolve's :class:`~pnsolve.kernels.Cosine` for one input column, so it
        is mapped when it reads one column (``active_dims`` of length 1, or
        ``input_dim=1``) and wrapped otherwise (exact for every ``d``).

    Returns
    -------
    Kernel
        The equivalent pnsolve kernel.

    Raises
    ------
    ImportError
        If GPyTorch is not installed.
    TypeError
        If ``kernel`` is not a ``gpytorch.kernels.Kernel``.
    ValueError
        For a kernel with a non-empty ``batch_shape`` anywhere in the expression (pnsolve
        kernels give one ``(n1, n2)`` matrix), naming the class and the shape; for an
        ``active_dims`` that reaches past the columns its enclosing kernel selects; for a
        bad ``input_dim``.

    Notes
    -----
    **Copied or shared.** Mapped kernels get *new* pnsolve parameters holding copies of
    GPyTorch's values (float64, softplus-positive, on the GPyTorch kernel's device):
    training them leaves the GPyTorch module unchanged, and GPyTorch's constraints
    (bounds) and priors are not carried over. Wrapped parts share the GPyTorch module:
    its parameters *are* the wrapper's parameters (see :class:`GPyTorchKernel`).

    **Learned parameters.** The converted kernel learns what GPyTorch learns: a GPyTorch
    parameter with ``requires_grad = False`` gives a frozen pnsolve parameter, and a
    parameter pnsolve has but GPyTorch does not (the outputscale of a bare
    ``RBFKernel``, fixed at 1) is frozen. A ``ScaleKernel``'s outputscale becomes the
    outputscale of an RBF, Matérn or RQ base kernel, else a learned
    :class:`~pnsolve.kernels.Constant` factor. GPyTorch's ``PeriodicKernel`` divides by
    its lengthscale ``λ`` where pnsolve's divides by ``ℓ²``: the copy is ``ℓ = √λ``.
    An ARD ``LinearKernel`` (one variance per column) becomes a sum of one-column
    :class:`~pnsolve.kernels.Linear` kernels, with the same learned variances.

    **Wrapped instead of mapped.** A ``PolynomialKernel`` with a non-integer or
    non-positive ``power`` or an offset that is not positive (possible with a custom
    constraint; pnsolve's offsets are positive), a ``CosineKernel`` on more than one
    (or an unknown number of) input columns, a ``SpectralMixtureKernel`` with
    ``ard_num_dims > 1`` (GPyTorch's multiplies one-dimensional mixtures over the
    dimensions, ``Π_j Σ_q w_q …``, where pnsolve's
    :class:`~pnsolve.kernels.SpectralMixture` is Wilson & Adams' ``Σ_q w_q Π_j …``;
    they agree for ``d = 1``), values that are not positive where pnsolve needs
    positive ones, and a ``ScaleKernel`` whose base is wrapped (the whole
    ``ScaleKernel`` is wrapped) all become :class:`GPyTorchKernel`. GPyTorch's KeOps
    kernels (``gpytorch.kernels.keops``) are wrapped too. Wrapped parts keep the GPyTorch
    module's dtype: for float64 data cast the GPyTorch kernel first
    (``gpytorch_kernel.double()``).

    **Columns.** ``active_dims`` of every part are honoured as GPyTorch applies them
    (a ``ScaleKernel`` selects its base kernel's columns; parts of a sum or product
    select from the columns of the sum or product).

    Examples
    --------
    >>> import torch, gpytorch, pnsolve as pn
    >>> gk = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=2))
    >>> gk = (gk + gpytorch.kernels.LinearKernel(active_dims=[0])).double()
    >>> k = pn.kernels.from_gpytorch(gk)
    >>> [type(p).__name__ for p in k.parts]
    ['RBF', 'Linear']
    >>> X = torch.randn(5, 2, dtype=torch.float64)
    >>> with torch.no_grad():
    ...     bool(torch.allclose(k(X), gk(X).to_dense()))
    True
    """
    if input_dim is not None and (
        isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1
    ):
        raise ValueError(f"input_dim must be a positive int or None, got {input_dim!r}")
    gpytorch = _gpytorch()
    if not isinstance(kernel, gpytorch.kernels.Kernel):
        raise TypeError(
            f"from_gpytorch converts a gpytorch.kernels.Kernel, got {type(kernel).__name__}"
        )
    _check_unbatched(kernel)
    return _FromGPyTorch(gpytorch.kernels, input_dim).convert(kernel)


class _FromGPyTorch:
    """One conversion: GPyTorch's kernels module and the options.

    ``cols`` is the column selection applied to the inputs *before* a kernel is called
    (``None``: all columns); ``own`` says whether the kernel then applies its own
    ``active_dims`` (``__call__``) or not (``forward``, as ``ScaleKernel`` calls its
    base kernel).
    """

    def __init__(self, gpk: Any, input_dim: int | None) -> None:
        self.gpk = gpk
        self.input_dim = input_dim

    def convert(self, k: Any) -> Kernel:
        native = self._native(k, None, own=True)
        return native if native is not None else GPyTorchKernel(k)

    def _native(self, k: Any, cols: tuple[int, ...] | None, own: bool) -> Kernel | None:
        """The native kernel, or ``None`` where there is no exact one."""
        gpk = self.gpk
        eff = _compose(cols, _dims(k) if own else None, k)
        t = type(k)
        if t is gpk.AdditiveKernel or t is gpk.ProductKernel:
            if len(k.kernels) == 0:
                return None
            parts: list[Kernel] = []
            for part in k.kernels:
                native = self._native(part, eff, own=True)
                parts.append(
                    native if native is not None else GPyTorchKernel(part, active_dims=eff)
                )
            if len(parts) == 1:
                return parts[0]
            return Sum(*parts) if t is gpk.AdditiveKernel else Product(*parts)
        if t is gpk.ScaleKernel:
            base = self._native(k.base_kernel, eff, own=False)
            return None if base is None else self._scaled(k, base)
        return self._leaf(k, eff)

    def _scaled(self, k: Any, base: Kernel) -> Kernel | None:
        """``ScaleKernel``: the outputscale folded into a stationary base, else a Constant."""
        c = _positive(k.outputscale, scalar=True)
        if c is None:
            return None
        learned = k.raw_outputscale.requires_grad
        stationary = (self.gpk.RBFKernel, self.gpk.MaternKernel, self.gpk.RQKernel)
        if type(k.base_kernel) in stationary and isinstance(base, StationaryKernel):
            base.outputscale = c
            base.raw_outputscale.requires_grad_(learned)  # frozen at 1 until now
            return base
        constant = Constant(c)
        _freeze(constant, "value", learned)
        return Product(constant, base)

    # -------------------------------------------------------------------- leaves
    def _leaf(self, k: Any, eff: tuple[int, ...] | None) -> Kernel | None:
        gpk = self.gpk
        t = type(k)
        if t is gpk.RBFKernel:
            return _stationary(RBF, k, eff)
        if t is gpk.MaternKernel:
            if k.nu not in (0.5, 1.5, 2.5):
                return None
            return _stationary(functools.partial(Matern, float(k.nu)), k, eff)
        if t is gpk.RQKernel:
            alpha = _positive(k.alpha, scalar=True)
            if alpha is None:
                return None
            rq = _stationary(functools.partial(RationalQuadratic, alpha=alpha), k, eff)
            if rq is not None:
                _freeze(rq, "alpha", k.raw_alpha.requires_grad)
            return rq
        if t is gpk.PeriodicKernel:
            return _periodic(k, eff)
        if t is gpk.LinearKernel:
            return _linear(k, eff)
        if t is gpk.PolynomialKernel:
            return _polynomial(k, eff)
        if t is gpk.CosineKernel:
            d = len(eff) if eff is not None else self.input_dim
            period = _positive(k.period_length, scalar=True)
            if d != 1 or period is None:
                return None
            cosine = Cosine(period=2.0 * period, active_dims=eff)
            _freeze(cosine, "period", k.raw_period_length.requires_grad)
            return cosine
        if t is gpk.SpectralMixtureKernel:
            return _spectral_mixture(k, eff)
        if t is getattr(gpk, "ConstantKernel", None):
            value = _positive(k.constant, scalar=True)
            if value is None:
                return None
            constant = Constant(value, active_dims=eff)
            _freeze(constant, "value", k.raw_constant.requires_grad)
            return constant
        return None


def _stationary(family: Any, k: Any, eff: tuple[int, ...] | None) -> Kernel | None:
    """RBF, Matérn or RQ with GPyTorch's lengthscale (outputscale 1, frozen)."""
    ls = _positive(k.lengthscale)
    if ls is None:
        return None
    kernel = family(lengthscale=ls, outputscale=1.0, active_dims=eff)
    assert isinstance(kernel, StationaryKernel)
    _freeze(kernel, "lengthscale", k.raw_lengthscale.requires_grad)
    _freeze(kernel, "outputscale", False)
    return kernel


def _periodic(k: Any, eff: tuple[int, ...] | None) -> Kernel | None:
    """``exp(−2 Σ sin²(π Δ/p) / λ)`` is pnsolve's Periodic with ``ℓ = √λ``."""
    lam, period = _positive(k.lengthscale), _positive(k.period_length)
    if lam is None or period is None:
        return None
    if lam.ndim == 1 and period.ndim == 1 and lam.numel() != period.numel():
        return None
    periodic = Periodic(lengthscale=lam.sqrt(), period=period, active_dims=eff)
    _freeze(periodic, "lengthscale", k.raw_lengthscale.requires_grad)
    _freeze(periodic, "period", k.raw_period_length.requires_grad)
    return periodic


def _linear(k: Any, eff: tuple[int, ...] | None) -> Kernel | None:
    """``Σ_j v_j x_j x'_j``: one Linear, or one per column for ARD variances."""
    v = _positive(k.variance)
    if v is None:
        return None
    learned = k.raw_variance.requires_grad
    if v.ndim == 0:
        linear = Linear(v, active_dims=eff)
        _freeze(linear, "variance", learned)
        return linear
    cols = eff if eff is not None else tuple(range(v.numel()))
    if len(cols) != v.numel():
        return None
    parts = [Linear(v[j], active_dims=[c]) for j, c in enumerate(cols)]
    for part in parts:
        _freeze(part, "variance", learned)
    return parts[0] if len(parts) == 1 else Sum(*parts)


def _polynomial(k: Any, eff: tuple[int, ...] | None) -> Kernel | None:
    """``(xᵀx' + offset)^power`` for an integer power ≥ 1 and a positive offset."""
    q = k.power
    ok = isinstance(q, numbers.Real) and not isinstance(q, bool) and math.isfinite(q)
    offset = _positive(k.offset, scalar=True)
    if not ok or q < 1 or q != int(q) or offset is None:
        return None
    poly = Polynomial(int(q), offset, active_dims=eff)
    _freeze(poly, "offset", k.raw_offset.requires_grad)
    return poly


def _spectral_mixture(k: Any, eff: tuple[int, ...] | None) -> Kernel | None:
    """One input dimension: ``Σ_q w_q exp(−2π² τ² s_q²) cos(2π τ μ_q)`` (variances ``s²``)."""
    if k.ard_num_dims != 1 or (eff is not None and len(eff) != 1):
        return None
    w = _positive(k.mixture_weights)
    mu = _positive(k.mixture_means)
    s = _positive(k.mixture_scales)
    if w is None or mu is None or s is None:
        return None
    Q = int(k.num_mixtures)
    sm = SpectralMixture(
        Q,
        ard_dims=1,
        weights=w.reshape(Q),
        means=mu.reshape(Q, 1),
        variances=(s * s).reshape(Q, 1),
        active_dims=eff,
    )
    _freeze(sm, "weights", k.raw_mixture_weights.requires_grad)
    _freeze(sm, "means", k.raw_mixture_means.requires_grad)
    _freeze(sm, "variances", k.raw_mixture_scales.requires_grad)
    return sm


# ------------------------------------------------------------------------------- helpers
def _positive(value: torch.Tensor, *, scalar: bool = False) -> torch.Tensor | None:
    """A float64 copy (0-d if one entry, else flattened), or ``None`` unless all positive."""
    v = value.detach().to(torch.float64).reshape(-1)
    if v.numel() == 0 or not bool(torch.isfinite(v).all()) or not bool((v > 0).all()):
        return None
    if v.numel() == 1:
        return v.reshape(())
    return None if scalar else v.clone()


def _freeze(kernel: Kernel, name: str, learned: bool) -> None:
    """Turn off the gradient of ``raw_<name>`` if GPyTorch does not learn that parameter."""
    raw = getattr(kernel, f"raw_{name}")
    assert isinstance(raw, torch.nn.Parameter)
    if not learned:
        raw.requires_grad_(False)


# -------------------------------------------------------------------------- GPyTorchKernel
