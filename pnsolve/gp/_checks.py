"""The argument checks of the GP layer (models, fits, posteriors, estimators, training).

One module, one convention (that of :mod:`pnsolve._core.validation`, which it builds on
and re-exports, and which the likelihoods share): ``TypeError`` for a wrong type (a
non-tensor ``X``, a string or a ``bool`` where a number belongs, an integer tensor where
a floating one does), ``ValueError`` for a wrong value (shape, range, NaN/Inf, an
unknown option, a device mismatch). Every message names the argument; shape errors show
the shape they got.

The GP models take torch tensors or NumPy arrays, as :func:`pnsolve.cg` does: a NumPy
array becomes a tensor (floating arrays keep their dtype, integer and boolean arrays
take the reference dtype) on the reference tensor's device. Complex inputs are refused.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._core.validation import (
    check_bool,
    check_choice,
    check_finite,
    check_generator,
    check_int,
    check_nonnegative_number,
    check_optional_positive_int,
    check_positive_int,
    check_positive_number,
    check_real_dtype,
    check_real_scalar,
    check_tensor,
    require_generator,
)
from ..kernels.base import StationaryKernel
from ..kernels.kernel import Kernel
from ..kernels.kernel_matrix import BACKENDS
from ..likelihoods.base import Likelihood

__all__ = [
    "as_tensor",
    "check_backend",
    "check_bool",
    "check_choice",
    "check_finite",
    "check_generator",
    "check_inputs",
    "check_int",
    "check_likelihood_targets",
    "check_mean",
    "check_model_kernel",
    "check_noise",
    "check_nonnegative_number",
    "check_optional_positive_int",
    "check_positive_int",
    "check_positive_number",
    "check_solutions",
    "check_stationary_kernel",
    "check_targets",
    "check_tensor",
    "require_generator",
]


def _dtype_name(dtype: object) -> str:
    return str(dtype).removeprefix("torch.")


def as_tensor(
    x: object,
    name: str,
    *,
    int_dtype: torch.dtype | None = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``x`` as a real tensor: tensors pass unchanged, NumPy arrays are converted.

    Parameters
    ----------
    x
        A ``torch.Tensor`` or ``numpy.ndarray``.
    name
        The argument's name for error messages.
    int_dtype
        Dtype for integer and boolean arrays; ``None`` keeps them integer (class
        labels, counts: the likelihood checks them).
    device
        Device of a converted array (default: torch's default device; tensors are never
        moved).

    Raises
    ------
    TypeError
        ``x`` is neither a tensor nor a NumPy array, or it is complex (``"X must be
        real, got complex128"``), or a NumPy array of a non-numeric or half dtype.
    """
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "c":
            raise TypeError(f"{name} must be real, got {x.dtype}")
        if x.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a numeric array, got dtype {x.dtype}")
        if not x.flags.writeable or any(s < 0 for s in x.strides):
            x = np.array(x)  # a writable, positively strided copy torch can share
        t = torch.as_tensor(x, device=device)
        check_real_dtype(t.dtype, name)  # float16 arrays: pnsolve computes in f32/f64
        if not t.is_floating_point() and int_dtype is not None:
            t = t.to(int_dtype)
        return t
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array, got {type(x).__name__}")
    if x.is_complex():
        raise TypeError(f"{name} must be real, got {_dtype_name(x.dtype)}")
    return x


def _check_like(x: torch.Tensor, name: str, like: torch.Tensor, other: str) -> None:
    """``x``'s dtype (``TypeError``) and device (``ValueError``) those of ``like``."""
    if x.dtype != like.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but {other} {like.dtype}; cast it (e.g. "
            f"{name}.to({like.dtype}))"
        )
    if x.device != like.device:
        raise ValueError(f"{name} is on device {x.device} but {other} on {like.device}")


def check_inputs(
    X: object, name: str, d: int | None = None, like: torch.Tensor | None = None
) -> torch.Tensor:
    """A finite floating ``(n, d)`` tensor (matching ``like``'s dtype/device when given).

    NumPy arrays are converted (see :func:`as_tensor`): floating arrays keep their
    dtype, integer arrays take ``like``'s dtype (float64 without ``like``).
    """
    X = as_tensor(
        X,
        name,
        int_dtype=torch.float64 if like is None else like.dtype,
        device=None if like is None else like.device,
    )
    if X.ndim != 2 or X.shape[0] < 1:
        raise ValueError(f"{name} must have shape (n, d) with n ≥ 1, got {tuple(X.shape)}")
    if not X.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {X.dtype}")
    check_real_dtype(X.dtype, name)  # float16/bfloat16: pnsolve computes in f32/f64
    if d is not None and X.shape[1] != d:
        raise ValueError(
            f"{name} must have {d} columns like the training inputs, got {X.shape[1]} "
            f"(shape {tuple(X.shape)})"
        )
    if like is not None:
        _check_like(X, name, like, "the training inputs have")
    return check_finite(X, name)


def check_targets(y: object, X: torch.Tensor, name: str = "y") -> torch.Tensor:
    """Finite targets of shape ``(n,)`` matching ``X``.

    A NumPy ``y`` is converted on ``X``'s device; integer arrays take ``X``'s dtype.
    """
    y = as_tensor(y, name, int_dtype=X.dtype, device=X.device)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"{name} must have shape ({X.shape[0]},) like X, got {tuple(y.shape)}")
    _check_like(y, name, X, "X has")
    return check_finite(y, name)


def check_likelihood_targets(
    y: object, X: torch.Tensor, likelihood: Likelihood, name: str = "y"
) -> torch.Tensor:
    """Targets the likelihood accepts (labels, counts, values), shape ``(n,)`` like ``X``.

    Integer labels and counts stay integers (the likelihood checks their values); a
    floating ``y`` must have ``X``'s dtype (``TypeError``, as for :func:`check_targets`);
    ``y`` must be on ``X``'s device (``ValueError``).
    """
    y = as_tensor(y, name, int_dtype=None, device=X.device)
    if y.is_floating_point():
        _check_like(y, name, X, "X has")
    elif y.device != X.device:
        raise ValueError(f"{name} is on device {y.device} but X has {X.device}")
    y = likelihood.check_targets(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"{name} must have shape ({X.shape[0]},) like X, got {tuple(y.shape)}")
    return y


def check_model_kernel(kernel: object) -> Kernel:
    """Require a :class:`~pnsolve.kernels.Kernel` (the GP models' prior; stationary or SKI)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a pnsolve.kernels.Kernel, got {type(kernel).__name__}")
    return kernel


def check_stationary_kernel(kernel: object, user: str) -> StationaryKernel:
    """Require a :class:`~pnsolve.kernels.StationaryKernel` for ``user`` (a model's name).

    For the models built on stationary kernels only (random features, explicit kernel
    formulas); SKI kernels are refused with a pointer to the models that take them.
    """
    if not isinstance(kernel, StationaryKernel):
        raise TypeError(
            f"kernel must be a stationary kernel (pn.kernels.RBF or Matern) for {user}, got "
            f"{type(kernel).__name__}; SKI kernels (GridInterpolation) work with ExactGP "
            "and IterGP"
        )
    return kernel


def check_noise(noise: object) -> float | torch.Tensor:
    """A positive finite noise variance: a number or a 0-d floating tensor, returned as given.

    A tensor keeps its graph (e.g. ``softplus(raw)`` while training) and may live on
    another device than the data, like the kernel's parameters.
    """
    check_positive_number(noise, "noise", what="variance", tensor=True)
    assert isinstance(noise, torch.Tensor | int | float)  # checked above
    return noise


def check_mean(mean: object) -> float | torch.Tensor:
    """A finite constant prior mean: a number or a 0-d floating tensor, returned as given."""
    value = check_real_scalar(mean, "mean")
    if not math.isfinite(value):
        raise ValueError(f"mean must be finite, got {mean!r}")
    assert isinstance(mean, torch.Tensor | int | float)  # checked above
    return mean


def check_backend(backend: object) -> str:
    """A kernel-matrix backend name (:data:`~pnsolve.kernels.kernel_matrix.BACKENDS`)."""
    return check_choice(backend, "backend", BACKENDS)


def check_solutions(solutions: object, X: torch.Tensor, columns: int) -> torch.Tensor:
    """Finite ``(n, columns)`` solutions in ``X``'s dtype/device, returned detached."""
    solutions = check_tensor(solutions, "solutions")
    n = X.shape[0]
    if tuple(solutions.shape) != (n, columns):
        raise ValueError(
            f"solutions must have shape ({n}, {columns}) (one column per target: y and "
            f"{columns - 1} probes), got {tuple(solutions.shape)}"
        )
    _check_like(solutions, "solutions", X, "X has")
    return check_finite(solutions.detach(), "solutions")
