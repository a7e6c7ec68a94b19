"""The checked arguments of an estimator call (checks from :mod:`pnsolve.gp._checks`)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ...kernels.kernel import Kernel
from .._checks import check_inputs, check_model_kernel, check_noise, check_targets

__all__ = ["Problem", "check_problem", "noise_value"]


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
    Like the kernel's parameters, a 0-d ``noise`` may live on another device than ``X``
    (it is cast to ``X``'s dtype and device where it is used: :func:`noise_value`).
    """
    kernel = check_model_kernel(kernel)
    X = check_inputs(X, "X")
    y = check_targets(y, X)
    noise = check_noise(noise)
    return Problem(kernel.bind(X), X, noise, y)


def noise_value(noise: float | torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """The noise variance as a detached 0-d tensor in ``X``'s dtype and device."""
    if isinstance(noise, torch.Tensor):
        return noise.detach().to(dtype=X.dtype, device=X.device)
    return torch.tensor(float(noise), dtype=X.dtype, device=X.device)
