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
        Without either (and a Python-number ``scale``) the operator *adopts* the dtype
        and device of the operators it is added to (``K + ScaledIdentity(n, σ²)``
        follows ``K``); on its own it uses torch's default dtype on the CPU.
    """

    def __init__(
        self,
        n: int,
        scale: float | torch.Tensor = 1.0,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        #: Whether sums re-create this operator in their partner's dtype and device.
        self.adopts = dtype is None and device is None and not isinstance(scale, torch.Tensor)
        if isinstance(scale, torch.Tensor):
            if scale.ndim != 0:
                raise ValueError(f"scale must be a scalar, got shape {tuple(scale.shape)}")
            dtype = dtype or scale.dtype
            device = device or scale.device
        dtype = dtype or torch.get_default_dtype()
        device = device or "cpu"
        psd = bool(torch.as_tensor(scale).detach() >= 0)
        super().__init__((int(n), int(n)), dtype, device, is_symmetric=True, is_psd=psd)
        self.scale = scale

    def adopted(self, like: LinearOperator) -> ScaledIdentity:
        """The operator in ``like``'s dtype and device if it :attr:`adopts`, else itself."""
        if not self.adopts or (self.dtype == like.dtype and self.device == like.device):
            return self
        return ScaledIdentity(self.shape[0], self.scale, dtype=like.dtype, device=like.device)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.scale * X

    def _diagonal(self) -> torch.Tensor:
        return torch.ones(self.shape[0], dtype=self.dtype, device=self.device) * self.scale

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(rows.numel(), self.shape[1], dtype=self.dtype, device=self.device)
        vals = torch.ones(rows.numel(), dtype=self.dtype, device=self.device) * self.scale
        out[torch.arange(rows.numel(), device=self.device), rows] = vals
        return out
