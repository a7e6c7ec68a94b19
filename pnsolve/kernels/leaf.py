"""Shared parts of the other families: active columns and positive parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from .active_dims import check_active_dims, minimum_dims, select_dims
from .kernel import Kernel
from .positive import inv_softplus, one_device, positive_value, set_positive_, softplus

__all__ = ["KnownSpectrum", "LeafKernel", "positive_property"]


class LeafKernel(Kernel):
    """A matrix-free family (not RBF, Matérn or RQ) with ``active_dims`` and positive parameters.

    Parameters are stored as ``raw_<name>`` (float64, ``value = softplus(raw)``) by
    :meth:`_positive_parameters`, read with :meth:`_value` (cast to the inputs' dtype and
    device, differentiable) and set with :meth:`_set_value`.
    """

    matrix_free = True
    has_keops_formula = True

    def __init__(self, active_dims: Sequence[int] | None = None) -> None:
        super().__init__()
        #: Input columns the kernel reads (``None``: all).
        self.active_dims = check_active_dims(active_dims)

    def _positive_parameters(self, **values: tuple[float | torch.Tensor, int]) -> None:
        """Register ``raw_<name>`` for ``name=(value, most dimensions)``, on one device."""
        checked = {}
        for name, (value, max_ndim) in values.items():
            t = positive_value(value, name)
            if t.ndim > max_ndim:
                shape = "a scalar or have shape (d,)" if max_ndim == 1 else "a scalar"
                raise ValueError(f"{name} must be {shape}, got shape {tuple(t.shape)}")
            checked[name] = (t, value)
        for name, t in zip(checked, one_device(**checked)):
            setattr(self, f"raw_{name}", nn.Parameter(inv_softplus(t)))

    def _raw(self, name: str) -> nn.Parameter:
        raw = getattr(self, f"raw_{name}")
        assert isinstance(raw, nn.Parameter)
        return raw

    def _value(self, name: str, like: torch.Tensor | None = None) -> torch.Tensor:
        """``softplus(raw_<name>)``, in ``like``'s dtype and device if given."""
        v = softplus(self._raw(name))
        return v if like is None else v.to(dtype=like.dtype, device=like.device)

    def _set_value(self, name: str, value: float | torch.Tensor) -> None:
        set_positive_(self._raw(name), value, name)

    def select(self, X: torch.Tensor) -> torch.Tensor:
        """The active columns of ``X`` (differentiable), shape ``(n, d_active)``."""
        return select_dims(X, self.active_dims)

    def _vector_sizes(self) -> set[int]:
        """Sizes of the ``(d,)`` parameters (per-column values)."""
        return {p.numel() for n, p in self.named_parameters(recurse=False) if p.ndim == 1}

    def input_dims(self) -> tuple[int | None, int]:
        """``(per-column parameter size if every column is read, 1 + largest active column)``."""
        sizes = self._vector_sizes()
        if len(sizes) > 1:  # pragma: no cover - refused in the constructors
            raise ValueError(f"per-column parameters of sizes {sorted(sizes)} disagree")
        exact = next(iter(sizes)) if sizes else None
        if self.active_dims is not None:
            if exact is not None and exact != len(self.active_dims):
                raise ValueError(
                    f"per-column parameters have {exact} entries but active_dims has "
                    f"{len(self.active_dims)} columns"
                )
            return None, minimum_dims(self.active_dims)
        return exact, 0

    def _dims_repr(self) -> str:
        return "" if self.active_dims is None else f", active_dims={list(self.active_dims)}"


def positive_property(name: str, doc: str) -> Any:
    """A property reading ``softplus(raw_<name>)`` and storing positive values into it."""

    def get(self: LeafKernel) -> torch.Tensor:
        return self._value(name)

    def put(self: LeafKernel, value: float | torch.Tensor) -> None:
        self._set_value(name, value)

    return property(get, put, doc=doc)


class KnownSpectrum(LeafKernel):
    """A family whose spectrum is a few known frequencies (constant, cosine).

    Its random Fourier features need no draws besides the phases; subclasses implement
    :meth:`~pnsolve.kernels.Kernel.spectral_projection`.
    """

    has_spectral_features = True

    def spectral_width(self, input_dim: int) -> int:
        """No draws: the spectrum is known exactly."""
        return 0

    def spectral_base(
        self,
        num_features: int,
        input_dim: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> torch.Tensor:
        """An empty ``(m, 0)`` block (nothing is random but the phases)."""
        return torch.empty(num_features, 0, dtype=dtype, device=device)
