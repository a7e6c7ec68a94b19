"""Operators defined by a torch callable."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .base import LinearOperator

__all__ = ["Closure"]


class Closure(LinearOperator):
    """An operator given by a function ``X ↦ A X``.

    Parameters
    ----------
    matmat
        Callable taking a tensor of shape ``(n, k)`` and returning ``(m, k)``.
    shape
        ``(m, n)``.
    dtype, device
        Of the products (default: torch's default dtype and device).
    rmatmat
        Optional callable for ``Aᵀ X`` (needed for non-symmetric transposes).
    diagonal
        Optional callable returning the diagonal, shape ``(min(m, n),)``.
    is_symmetric, is_psd
        Structural flags (not checked).

    Raises
    ------
    ValueError
        If ``matmat`` returns a tensor of the wrong shape, dtype or device.
    """

    def __init__(
        self,
        matmat: Callable[[torch.Tensor], torch.Tensor],
        shape: tuple[int, int],
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        rmatmat: Callable[[torch.Tensor], torch.Tensor] | None = None,
        diagonal: Callable[[], torch.Tensor] | None = None,
        is_symmetric: bool = False,
        is_psd: bool = False,
    ) -> None:
        if not callable(matmat):
            raise TypeError(f"matmat must be callable, got {type(matmat).__name__}")
        super().__init__(
            shape,
            dtype or torch.get_default_dtype(),
            torch.get_default_device() if device is None else device,
            is_symmetric=is_symmetric,
            is_psd=is_psd,
        )
        self._fn = matmat
        self._rfn = rmatmat
        self._dfn = diagonal

    def _checked(self, out: object, rows: int, k: int, what: str) -> torch.Tensor:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows, k):
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"the {what} callable returned {got}, expected shape {(rows, k)}")
        if out.dtype != self.dtype or out.device != self.device:
            raise ValueError(
                f"the {what} callable returned dtype {out.dtype} on {out.device}, expected "
                f"{self.dtype} on {self.device}"
            )
        return out

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self._checked(self._fn(X), self.shape[0], X.shape[1], "matmat")

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        if self._rfn is not None:
            return self._checked(self._rfn(X), self.shape[1], X.shape[1], "rmatmat")
        return super()._rmatmat(X)

    def _diagonal(self) -> torch.Tensor:
        if self._dfn is not None:
            return self._dfn()
        return super()._diagonal()
