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

import torch

from .._core.inputs import _check_like, as_tensor, check_inputs
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
    check_real_scalar,
    check_tensor,
    require_generator,
)
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
    "check_matrix_free_kernel",
    "check_mean",
    "check_model_kernel",
    "check_noise",
    "check_nonnegative_number",
    "check_optional_positive_int",
    "check_positive_int",
    "check_positive_number",
    "check_solutions",
    "check_targets",
    "check_tensor",
    "require_generator",
]


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


def check_matrix_free_kernel(kernel: object, user: str) -> Kernel:
    """Require a matrix-free :class:`~pnsolve.kernels.Kernel` for ``user`` (a model's name).

    Every family of :mod:`pnsolve.kernels` and their sums and products qualify; SKI
    kernels (``GridInterpolation``) are refused with a pointer to the models that take
    them.
    """
    if not isinstance(kernel, Kernel) or not kernel.matrix_free:
        raise TypeError(
            f"kernel must be a family of pn.kernels or an expression of them for {user}, got "
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
