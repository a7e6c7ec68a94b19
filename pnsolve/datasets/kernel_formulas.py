"""Plain stationary kernel formulas used by the data generators and the problem zoo.

They follow the convention of :mod:`pnsolve.kernels`: with
``r = ‖x − x'‖ / lengthscale``, RBF is ``outputscale · exp(−r²/2)`` and Matérn ν is
``outputscale · m_ν(r)``. They are written here so that data generation does not
depend on the kernel package and stays reproducible on its own.
"""

from __future__ import annotations

import math

import torch

__all__ = ["KERNEL_NAMES", "stationary_kernel"]

KERNEL_NAMES = ("rbf", "matern12", "matern32", "matern52")


def _scaled_distance(X1: torch.Tensor, X2: torch.Tensor, lengthscale: float) -> torch.Tensor:
    return torch.cdist(X1 / lengthscale, X2 / lengthscale)


def stationary_kernel(
    X1: torch.Tensor,
    X2: torch.Tensor,
    *,
    kind: str = "rbf",
    lengthscale: float = 1.0,
    outputscale: float = 1.0,
) -> torch.Tensor:
    """Dense kernel matrix ``k(X1, X2)`` of shape ``(n1, n2)``.

    Parameters
    ----------
    X1, X2
        Inputs of shapes ``(n1, d)`` and ``(n2, d)``.
    kind
        One of ``"rbf"``, ``"matern12"``, ``"matern32"``, ``"matern52"``.
    lengthscale, outputscale
        Positive scalars.
    """
    if kind not in KERNEL_NAMES:
        raise ValueError(f"kernel must be one of {KERNEL_NAMES}, got {kind!r}")
    if not lengthscale > 0:
        raise ValueError(f"lengthscale must be positive, got {lengthscale}")
    if not outputscale > 0:
        raise ValueError(f"outputscale must be positive, got {outputscale}")
    r = _scaled_distance(X1, X2, lengthscale)
    if kind == "rbf":
        k = torch.exp(-0.5 * r.square())
    elif kind == "matern12":
        k = torch.exp(-r)
    elif kind == "matern32":
        s = math.sqrt(3.0) * r
        k = (1.0 + s) * torch.exp(-s)
    else:
        s = math.sqrt(5.0) * r
        k = (1.0 + s + s.square() / 3.0) * torch.exp(-s)
    return outputscale * k
