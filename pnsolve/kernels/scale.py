"""A kernel times a fixed positive number: ``c * k``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .kernel import Kernel, TileOperands

__all__ = ["Scale"]


class Scale(Kernel):
    """``k(x, x') = c · base(x, x')`` with a fixed positive ``c``; written ``c * k``.

    Parameters
    ----------
    kernel
        The kernel scaled.
    scale
        A positive float or 0-d tensor, fixed (a buffer, not learned). For a learned
        scale write ``pn.kernels.Constant(c) * k`` (one softplus parameter, at no cost
        per tile).

    Raises
    ------
    ValueError
        For a non-positive, non-finite or non-scalar ``scale``.
    """

    def __init__(self, kernel: Kernel, scale: float | torch.Tensor) -> None:
        super().__init__()
        if not isinstance(kernel, Kernel):
            raise TypeError(f"Scale scales a pnsolve kernel, got {type(kernel).__name__}")
        c = torch.as_tensor(scale, dtype=torch.float64, device="cpu").detach().cpu()
        if c.ndim != 0 or not bool(torch.isfinite(c)) or float(c) <= 0:
            raise ValueError(f"scale must be a positive finite scalar, got {scale!r}")
        #: The kernel scaled.
        self.base_kernel = kernel
        self.register_buffer("scale", c.clone())
        self.scale: torch.Tensor

    @property
    def matrix_free(self) -> bool:  # type: ignore[override]
        """Whether the scaled kernel is matrix-free."""
        return self.base_kernel.matrix_free

    @property
    def has_keops_formula(self) -> bool:  # type: ignore[override]
        """Whether the scaled kernel has a KeOps formula."""
        return self.base_kernel.has_keops_formula

    @property
    def stationary(self) -> bool:  # type: ignore[override]
        """Whether the scaled kernel is stationary."""
        return self.base_kernel.stationary

    @property
    def has_spectral_features(self) -> bool:  # type: ignore[override]
        """Whether the scaled kernel has random Fourier features."""
        return self.base_kernel.has_spectral_features

    def spectral_width(self, input_dim: int) -> int:
        """The scaled kernel's."""
        return self.base_kernel.spectral_width(input_dim)

    def spectral_base(
        self,
        num_features: int,
        input_dim: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> torch.Tensor:
        """The scaled kernel's draws."""
        return self.base_kernel.spectral_base(
            num_features, input_dim, generator=generator, dtype=dtype, device=device
        )

    def spectral_projection(
        self, X: torch.Tensor, base: torch.Tensor, phases: torch.Tensor, num_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The scaled kernel's projection, amplitudes times ``c``."""
        proj, amp = self.base_kernel.spectral_projection(X, base, phases, num_features)
        return proj, self._c(X) * amp

    def spectral_state(self) -> tuple[float, ...]:
        """The scaled kernel's."""
        return self.base_kernel.spectral_state()

    @property
    def tile_buffers(self) -> int:  # type: ignore[override]
        """The scaled kernel's scratch."""
        return self.base_kernel.tile_buffers

    @property
    def tile_is_ones(self) -> bool:  # type: ignore[override]
        """Whether the scaled kernel's tiles are all ones."""
        return self.base_kernel.tile_is_ones

    def input_dims(self) -> tuple[int | None, int]:
        """Those of the scaled kernel."""
        return self.base_kernel.input_dims()

    def bind(self, X: torch.Tensor) -> Kernel:
        """The scaled kernel bound to ``X``, scaled."""
        bound = self.base_kernel.bind(X)
        return self if bound is self.base_kernel else Scale(bound, self.scale)

    def _c(self, like: torch.Tensor) -> torch.Tensor:
        return self.scale.to(dtype=like.dtype, device=like.device)

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        return self._c(X1) * self.base_kernel._dense(X1, X2, self_index)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return self._c(X) * self.base_kernel._diag(X)

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return self._c(X1) * self.base_kernel._paired(X1, X2)

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """The scaled kernel's operands."""
        return self.base_kernel.tile_operands(X, left)

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """The scaled kernel's tile (the scale is applied once per product)."""
        self.base_kernel.fill_tile_(s, a, b, diag, work)

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """``c`` times the scaled kernel's scale."""
        return self._c(like) * self.base_kernel.tile_scale(like)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """The scaled kernel's formula."""
        return self.base_kernel.keops_formula(LazyTensor, A, B, self_offset)

    def __repr__(self) -> str:
        return f"{float(self.scale):.4g} * {self.base_kernel!r}"
