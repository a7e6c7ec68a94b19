"""The covariance-function protocol the GP models and estimators use."""

from __future__ import annotations

import abc
from typing import Any

import torch
from torch import nn

from ..linops.base import LinearOperator

__all__ = ["Kernel"]


class Kernel(nn.Module, metaclass=abc.ABCMeta):
    """A covariance function ``k(x, x')`` with dense, diagonal and operator access.

    Implemented by :class:`~pnsolve.kernels.StationaryKernel` (RBF, Matérn) and by
    :class:`~pnsolve.kernels.GridInterpolation` (SKI). The GP models (``ExactGP``,
    ``IterGP``, LOVE) and the marginal-likelihood estimators only call the methods
    here, so any kernel with these methods works with them.
    """

    @abc.abstractmethod
    def check_inputs(
        self, X1: object, X2: object | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Validate inputs ``(n1, d)`` and ``(n2, d)``; errors name the argument."""

    @abc.abstractmethod
    def forward(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        """Dense ``k(X1, X2)`` of shape ``(n1, n2)`` (``X2 = None`` means ``X1``)."""

    @abc.abstractmethod
    def diag(self, X: torch.Tensor) -> torch.Tensor:
        """``k(x_i, x_i)`` for the rows of ``X`` ``(n, d)``; shape ``(n,)``."""

    @abc.abstractmethod
    def linop(
        self,
        X1: torch.Tensor,
        X2: torch.Tensor | None = None,
        backend: str = "auto",
        **opts: Any,
    ) -> LinearOperator:
        """``k(X1, X2)`` as a structured or matrix-free operator, shape ``(n1, n2)``."""

    @abc.abstractmethod
    def bilinear_backward(
        self, X: torch.Tensor, U: torch.Tensor, W: torch.Tensor, *, rows: int
    ) -> None:
        """Add ``∇ Σ_c U[:, c]ᵀ k(X, X) W[:, c]`` to the ``.grad`` of the parameters.

        The gradient of the marginal-likelihood estimators' bilinear surrogate, without
        an ``n × n`` graph. ``U`` and ``W`` are detached ``(n, k)`` blocks; ``rows`` is a
        memory hint (rows of ``k(X, X)`` per differentiable block) for kernels that
        work row block by row block.
        """

    def bind(self, X: torch.Tensor) -> Kernel:
        """The kernel with every data-derived setting fixed by the training inputs ``X``.

        The models call it in ``fit`` so that the training operator, cross-covariances
        and predictions share one configuration. Kernels without such settings return
        themselves; :class:`~pnsolve.kernels.GridInterpolation` without ``grid_bounds``
        returns a copy whose grid covers ``X`` (sharing the base kernel's parameters).
        """
        return self
