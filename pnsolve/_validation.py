"""Argument checks shared across pnsolve; each error names the offending argument."""

from __future__ import annotations

import torch

__all__ = [
    "SUPPORTED_DTYPES",
    "check_finite",
    "check_generator",
    "check_real_dtype",
    "check_same_device",
    "check_same_dtype",
    "check_tensor",
    "is_floating",
]


#: The floating dtypes pnsolve computes in (half precision cannot hold a Krylov basis).
SUPPORTED_DTYPES = (torch.float32, torch.float64)


def check_real_dtype(dtype: torch.dtype, name: str) -> None:
    """Refuse complex and half-precision dtypes with a ``TypeError`` naming ``name``.

    Integer and boolean dtypes pass (callers convert them to a floating dtype).
    """
    if dtype.is_complex:
        raise TypeError(
            f"{name} must be real, got {dtype}: pnsolve solves real symmetric systems "
            "(a complex input is never cast silently)"
        )
    if dtype.is_floating_point and dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"{name} has unsupported dtype {dtype}: pnsolve computes in float32 or float64 "
            f"(cast it, e.g. {name}.float())"
        )


def is_floating(dtype: torch.dtype) -> bool:
    """Return whether ``dtype`` is a real floating-point dtype."""
    return dtype.is_floating_point


def check_tensor(x: object, name: str) -> torch.Tensor:
    """Require ``x`` to be a ``torch.Tensor``.

    Raises
    ------
    TypeError
        If ``x`` is not a tensor; the message names ``name``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(x).__name__}; "
            "convert it with torch.as_tensor(...) first"
        )
    return x


def check_finite(x: torch.Tensor, name: str) -> torch.Tensor:
    """Raise ``ValueError`` naming ``name`` if ``x`` holds NaN or Inf."""
    if not bool(torch.isfinite(x).all()):
        bad = "NaN" if bool(torch.isnan(x).any()) else "Inf"
        raise ValueError(f"{name} contains {bad} values")
    return x


def check_same_dtype(x: torch.Tensor, dtype: torch.dtype, name: str, other: str) -> None:
    """Raise ``TypeError`` if ``x.dtype`` differs from ``dtype`` (of ``other``)."""
    if x.dtype != dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but {other} has dtype {dtype}; "
            f"cast one of them (e.g. {name}.to({dtype}))"
        )


def check_same_device(x: torch.Tensor, device: torch.device, name: str, other: str) -> None:
    """Raise ``ValueError`` if ``x`` lives on another device than ``other``."""
    if torch.device(x.device) != torch.device(device):
        raise ValueError(
            f"{name} is on device {x.device} but {other} is on device {device}; "
            "move them to the same device"
        )


def check_generator(generator: object, name: str = "generator") -> torch.Generator | None:
    """Require ``generator`` to be ``None`` or a ``torch.Generator``."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{name} must be a torch.Generator or None, got {type(generator).__name__}")
    return generator
