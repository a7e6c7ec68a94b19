"""Pseudo-input actions: kernel columns ``k(X, z_j)`` at inducing points ``Z``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .._core.validation import check_finite, check_same_device, check_same_dtype, check_tensor
from ..linops.base import LinearOperator
from ._common import check_block_size, own_memory, zero_action
from .base import Policy

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..solvers.state import SolverState

__all__ = ["PseudoInput", "PseudoInputMemory"]


@dataclass(frozen=True)
class PseudoInputMemory:
    """Per-run memory of :class:`PseudoInput`: ``position`` pseudo-inputs used so far."""

    position: int = 0


class PseudoInput(Policy):
    """Actions ``k(X, z_j)``: kernel columns at pseudo-inputs ``z_j``, in order.

    For a kernel system ``A = K_XX + Λ`` these actions make the belief a
    subset-of-regressors / inducing-point approximation with inducing inputs ``Z``.
    Once all ``m`` pseudo-inputs are used the policy returns a zero action and the
    solver stops with ``StopReason.BREAKDOWN``.

    Parameters
    ----------
    kernel
        A callable ``kernel(X1, X2)`` returning the dense ``(len(X1), len(X2))`` kernel
        matrix, e.g. :class:`pnsolve.kernels.RBF`.
    X
        Training inputs, shape ``(n, d)``, matching the system's size, dtype and device.
    Z
        Pseudo-inputs, shape ``(m, d)``, with ``X``'s dtype and device.
    block_size
        Pseudo-inputs per iteration: actions ``k(X, Z[j:j+block_size])`` of shape
        ``(n, block_size)`` (fewer columns in the last block).
    """

    def __init__(
        self,
        kernel: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        X: torch.Tensor,
        Z: torch.Tensor,
        block_size: int = 1,
    ) -> None:
        if not callable(kernel):
            raise TypeError(f"kernel must be callable, got {type(kernel).__name__}")
        for name, t in (("X", X), ("Z", Z)):
            check_tensor(t, name)
            if t.ndim != 2 or t.shape[0] < 1:
                raise ValueError(f"{name} must have shape (points, d), got {tuple(t.shape)}")
            if not t.dtype.is_floating_point:
                raise TypeError(f"{name} must have a floating dtype, got {t.dtype}")
            check_finite(t, name)
        if Z.shape[1] != X.shape[1]:
            raise ValueError(
                f"Z has {Z.shape[1]} input dimensions but X has {X.shape[1]}; "
                "they must have the same d"
            )
        check_same_dtype(Z, X.dtype, "Z", "X")
        check_same_device(Z, X.device, "Z", "X")
        self.kernel = kernel
        self.X = X
        self.Z = Z
        self.block_size = check_block_size(block_size)

    @property
    def adaptive(self) -> bool:
        """``False``: the actions come from the kernel and the pseudo-inputs, never ``b``."""
        return False

    def initial_memory(
        self, A: LinearOperator, b: torch.Tensor, generator: torch.Generator | None
    ) -> PseudoInputMemory:
        """Check ``X`` against the system; no pseudo-input used yet."""
        if self.X.shape[0] != A.shape[0]:
            raise ValueError(
                f"X has {self.X.shape[0]} points but A has shape {tuple(A.shape)}; "
                "PseudoInput needs the system's training inputs"
            )
        check_same_dtype(self.X, A.dtype, "X", "A")
        check_same_device(self.X, A.device, "X", "A")
        return PseudoInputMemory()

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, PseudoInputMemory]:
        """Return ``(k(X, Z_block), memory)``, the actions of shape ``(n, k)``."""
        memory = own_memory(self, state, PseudoInputMemory)
        j = memory.position
        if j >= self.Z.shape[0]:
            return zero_action(state.residual), memory
        Zj = self.Z[j : j + self.block_size]
        return self.kernel(self.X, Zj), PseudoInputMemory(j + Zj.shape[0])

    def __repr__(self) -> str:
        return (
            f"PseudoInput(kernel={self.kernel!r}, X=<{tuple(self.X.shape)}>, "
            f"Z=<{tuple(self.Z.shape)}>, block_size={self.block_size})"
        )
