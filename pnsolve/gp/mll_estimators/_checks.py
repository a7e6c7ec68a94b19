"""Argument checks shared by the gradient estimators; every error names the argument."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ...kernels.base import StationaryKernel
from ...kernels.kernel import Kernel
from .._checks import check_inputs, check_targets

__all__ = [
    "Problem",
    "check_chunk_rows",
    "check_kernel",
    "check_noise_arg",
    "check_positive_int",
    "check_problem",
    "check_solutions",
    "check_stationary",
    "noise_value",
]


def check_kernel(kernel: object) -> Kernel:
    """Require a :class:`~pnsolve.kernels.Kernel` (stationary or SKI)."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a pnsolve.kernels.Kernel, got {type(kernel).__name__}")
    return kernel


def check_stationary(kernel: object) -> StationaryKernel:
    """Require a :class:`~pnsolve.kernels.StationaryKernel` (random-feature estimators)."""
    if not isinstance(kernel, StationaryKernel):
        raise TypeError(
            "kernel must be a pnsolve.kernels.StationaryKernel (the pathwise estimator "
            f"draws random Fourier features of it), got {type(kernel).__name__}"
        )
    return kernel


def check_positive_int(value: object, name: str) -> int:
    """Require an ``int ≥ 1`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_chunk_rows(value: object) -> int | None:
    """``None`` (automatic) or a positive int."""
    return None if value is None else check_positive_int(value, "chunk_rows")


def check_noise_arg(noise: object) -> float | torch.Tensor:
    """A positive finite noise variance: a number or a 0-d floating tensor.

    Like the kernel's parameters, a 0-d ``noise`` may live on another device than ``X``
    (it is cast to ``X``'s dtype and device where it is used).
    """
    if isinstance(noise, torch.Tensor):
        if noise.ndim != 0:
            raise ValueError(f"noise must be a 0-d tensor, got shape {tuple(noise.shape)}")
        if not noise.is_floating_point():
            raise TypeError(f"noise must have a floating dtype, got {noise.dtype}")
        value = float(noise.detach())
    elif isinstance(noise, int | float) and not isinstance(noise, bool):
        value = float(noise)
    else:
        raise TypeError(f"noise must be a float or a 0-d tensor, got {type(noise).__name__}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"noise must be a positive finite variance, got {value!r}")
    return noise


def noise_value(noise: float | torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """The noise variance as a detached 0-d tensor in ``X``'s dtype and device."""
    if isinstance(noise, torch.Tensor):
        return noise.detach().to(dtype=X.dtype, device=X.device)
    return torch.tensor(float(noise), dtype=X.dtype, device=X.device)


class Problem(NamedTuple):
    """Checked arguments of an estimator: ``K̂ = K(X, X) + noise · I`` and targets ``y``."""

    kernel: Kernel
    X: torch.Tensor
    noise: float | torch.Tensor
    y: torch.Tensor


def check_problem(kernel: object, X: object, noise: object, y: object) -> Problem:
    """Validate ``kernel``, ``X (n, d)``, ``noise`` and ``y (n,)`` (``X``'s dtype/device).

    The kernel comes back bound to ``X`` (:meth:`~pnsolve.kernels.Kernel.bind`: a SKI grid
    without bounds covers the training inputs, so that posterior queries use its grid).
    """
    kernel = check_kernel(kernel)
    X = check_inputs(X, "X")
    y = check_targets(y, X)
    noise = check_noise_arg(noise)
    return Problem(kernel.bind(X), X, noise, y)


def check_solutions(solutions: object, X: torch.Tensor, columns: int) -> torch.Tensor:
    """Finite ``(n, columns)`` solutions in ``X``'s dtype/device, returned detached."""
    if not isinstance(solutions, torch.Tensor):
        raise TypeError(f"solutions must be a torch.Tensor, got {type(solutions).__name__}")
    n = X.shape[0]
    if tuple(solutions.shape) != (n, columns):
        raise ValueError(
            f"solutions must have shape ({n}, {columns}) (one column per target: y and "
            f"{columns - 1} probes), got {tuple(solutions.shape)}"
        )
    if solutions.dtype != X.dtype or solutions.device != X.device:
        raise TypeError(
            f"solutions has dtype {solutions.dtype} on {solutions.device}; X has "
            f"{X.dtype} on {X.device}"
        )
    solutions = solutions.detach()
    if not bool(torch.isfinite(solutions).all()):
        raise ValueError("solutions contains NaN or Inf values")
    return solutions
