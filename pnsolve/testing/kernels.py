"""A registry of kernels for contract tests: every family and typical expressions.

Shared by the test suites (kernel contract, row blocks, distributed products) so a new
family is tested everywhere by adding it here once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import kernels as K

__all__ = ["KEOPS_CASES", "KERNEL_CASES", "make_kernel_case"]

F64 = torch.float64

#: ``name → (factory, d)``: a fresh kernel and the input dimension it takes.
KERNEL_CASES: dict[str, tuple[Callable[[], K.Kernel], int]] = {
    "rbf-ard": (lambda: K.RBF(lengthscale=torch.tensor([0.4, 0.9], dtype=F64)), 2),
    "matern12": (lambda: K.Matern(nu=0.5, lengthscale=0.5, outputscale=1.5), 2),
    "matern52": (lambda: K.Matern(nu=2.5, lengthscale=0.6), 2),
    "rq": (lambda: K.RationalQuadratic(lengthscale=0.5, alpha=1.5, outputscale=0.7), 2),
    "periodic-ard": (
        lambda: K.Periodic(
            lengthscale=torch.tensor([0.8, 1.3], dtype=F64), period=torch.tensor([0.7, 1.1])
        ),
        2,
    ),
    "cosine": (lambda: K.Cosine(period=torch.tensor([0.9, 1.7], dtype=F64)), 2),
    "linear": (lambda: K.Linear(variance=0.6), 2),
    "polynomial": (lambda: K.Polynomial(degree=3, offset=0.5), 2),
    "constant": (lambda: K.Constant(1.7), 2),
    "white": (lambda: K.White(0.3), 2),
    "spectral-mixture": (
        lambda: K.SpectralMixture(
            2,
            weights=torch.tensor([0.6, 0.3], dtype=F64),
            means=torch.tensor([[0.3, 0.7], [1.1, 0.2]], dtype=F64),
            variances=torch.tensor([[0.05, 0.2], [0.1, 0.03]], dtype=F64),
        ),
        2,
    ),
    "sum": (lambda: K.RBF(0.5) + K.Matern(nu=1.5, lengthscale=0.8, outputscale=0.4), 2),
    "product": (lambda: K.RBF(0.9) * K.Periodic(lengthscale=1.1, period=0.8), 2),
    "scaled": (lambda: 2.5 * K.Matern(nu=2.5, lengthscale=0.7), 2),
    "constant-product": (lambda: K.Constant(0.8) * K.RationalQuadratic(0.6, 2.0), 2),
    "mauna-loa": (
        lambda: (
            K.Constant(2.0) * K.RBF(1.5)
            + K.RBF(2.0, outputscale=0.5) * K.Periodic(1.2, 0.9)
            + K.RationalQuadratic(0.7, 1.2, 0.3)
            + K.White(0.05)
        ),
        1,
    ),
    "active-dims": (
        lambda: K.RBF(0.5, active_dims=[1]) * K.Linear(0.8, active_dims=[0]) + K.Cosine(1.3),
        2,
    ),
    "nested": (
        lambda: (K.Polynomial(2, 1.0) + K.White(0.2)) * K.RBF(0.7) + 0.5 * K.Constant(0.3),
        2,
    ),
    "constant-first": (lambda: K.Constant(0.4) + K.RBF(0.6) + K.Constant(0.2), 2),
}

#: The cases the KeOps backend is tested on (each formula compiles once, about 6 s on a
#: CPU): one of every kind of formula (stationary sum, products with feature scalar
#: products and constants, index formulas for white noise, the spectral mixture).
KEOPS_CASES = ("mauna-loa", "active-dims", "nested", "spectral-mixture")


def make_kernel_case(name: str) -> tuple[K.Kernel, int]:
    """A fresh kernel of case ``name`` and its input dimension."""
    factory, d = KERNEL_CASES[name]
    return factory(), d
