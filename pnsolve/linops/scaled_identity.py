"""Scaled identity ``c I``."""

from __future__ import annotations

import torch

from .base import LinearOperator

__all__ = ["ScaledIdentity"]


class ScaledIdentity(LinearOperator):
    """``c · I_n``.

    Parameters
    ----------
    n
        Size.
    scale
        Python number or 0-d tensor (a tensor keeps autograd to e.g. a noise parameter).
    dtype, device
        Of products; taken from ``scale`` when it is a tensor and these are omitted.
        Each one omitted (with a Python-number ``scale``) is *adopted* from the
        operators it is added to: ``K + ScaledIdentity(n, σ²)`` follows ``K``, and
        ``K + ScaledIdentity(n, σ², dtype=torch.float64)`` follows ``K``'s device (a
        CUDA ``K`` gets a CUDA identity). On its own it uses torch's default dtype and
        device.
    """

    def __init__(
        self,
        n: int,
        scale: float | torch.Tensor = 1.0,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        # Whether sums re-create this operator in their partner's dtype / device.
        free = not isinstance(scale, torch.Tensor)
        self._adopt_dtype, self._adopt_device = free and dtype is None, free and device is None
        if isinstance(scale, torch.Tensor):
            if scale.ndim != 0:
                raise ValueError(f"scale must be a scalar, got shape {tuple(scale.shape)}")
            dtype = dtype or scale.dtype
            device = device or scale.device
        dtype = dtype or torch.get_default_dtype()
        device = device or torch.get_default_device()
        psd = bool(scale >= 0)
        super().__init__((int(n), int(n)), dtype, device, is_symmetric=True, is_psd=psd)
        self.scale = scale

    @property
    def adopts(self) -> bool:
        """Whether sums re-create this operator in their partner's dtype or device."""
        return self._adopt_dtype or self._adopt_device

    def negated(self) -> ScaledIdentity:
        """``−c · I`` with the same dtype and device (adopted ones stay adoptable)."""
        return ScaledIdentity(
            self.shape[0],
            -self.scale,
            dtype=None if self._adopt_dtype else self.dtype,
            device=None if self._adopt_device else self.device,
        )

    def adopted(self, like: LinearOperator) -> ScaledIdentity:
        """The operator in ``like``'s dtype and device where it adopts them, else itself."""
        dtype = like.dtype if self._adopt_dtype else self.dtype
        device = like.device if self._adopt_device else self.device
        if dtype == self.dtype and device == self.device:
            return self
        out = ScaledIdentity(self.shape[0], self.scale, dtype=dtype, device=device)
        out._adopt_dtype, out._adopt_device = self._adopt_dtype, self._adopt_device
        return out

    def _to(self, dtype: torch.dtype) -> ScaledIdentity:
        scale = self.scale.to(dtype) if isinstance(self.scale, torch.Tensor) else self.scale
        return ScaledIdentity(self.shape[0], scale, dtype=dtype, device=self.device)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.scale * X

    def _diagonal(self) -> torch.Tensor:
        return torch.ones(self.shape[0], dtype=self.dtype, device=self.device) * self.scale

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(rows.numel(), self.shape[1], dtype=self.dtype, device=self.device)
        vals = torch.ones(rows.numel(), dtype=self.dtype, device=self.device) * self.scale
        out[torch.arange(rows.numel(), device=self.device), rows] = vals
        return out
