"""Argument checks shared across pnsolve; each error names the offending argument.

One convention: ``TypeError`` for a wrong type (a non-tensor where a tensor belongs, a
string or a ``bool`` where a number belongs, an integer tensor where a floating one
does), ``ValueError`` for a wrong value (shape, range, NaN/Inf, an unknown option, a
device mismatch). Shape errors show the shape they got.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "SUPPORTED_DTYPES",
    "check_binary_labels",
    "check_bool",
    "check_choice",
    "check_class_labels",
    "check_counts",
    "check_finite",
    "check_generator",
    "check_int",
    "check_nonnegative_number",
    "check_optional_positive_int",
    "check_positive_int",
    "check_positive_number",
    "check_real_dtype",
    "check_real_scalar",
    "check_real_targets",
    "check_same_device",
    "check_same_dtype",
    "check_tensor",
    "is_floating",
    "require_generator",
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


def require_generator(
    generator: object, name: str = "generator", *, hint: str = ""
) -> torch.Generator:
    """Require a ``torch.Generator`` (``None`` is refused: randomness is explicit).

    ``hint``, if given, follows "must be a torch.Generator" in parentheses.
    """
    if not isinstance(generator, torch.Generator):
        hint = f" ({hint})" if hint else ""
        raise TypeError(f"{name} must be a torch.Generator{hint}, got {type(generator).__name__}")
    return generator


def check_int(value: object, name: str, *, minimum: int, type_name: bool = False) -> int:
    """Require an int ``≥ minimum`` (bools refused: ``True`` is no count).

    ``TypeError`` for a non-int (showing the value's repr, or with ``type_name`` its
    type's name), ``ValueError`` below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        got = type(value).__name__ if type_name else repr(value)
        raise TypeError(f"{name} must be an int, got {got}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


def check_positive_int(value: object, name: str, *, type_name: bool = False) -> int:
    """Require an int ``≥ 1`` (bools refused); see :func:`check_int`."""
    return check_int(value, name, minimum=1, type_name=type_name)


def check_optional_positive_int(value: object, name: str) -> int | None:
    """``None``, or an int ``≥ 1`` (:func:`check_positive_int`)."""
    return None if value is None else check_positive_int(value, name)


def check_real_scalar(value: object, name: str) -> float:
    """The value of a real number or a 0-d floating tensor, as a float (may be NaN/Inf).

    Raises
    ------
    TypeError
        A ``bool``, a string, ``None``, an integer or complex tensor, anything else.
    ValueError
        A tensor that is not 0-d (the message shows its shape).
    """
    if isinstance(value, torch.Tensor):
        if value.ndim != 0:
            raise ValueError(f"{name} must be a scalar (0-d), got shape {tuple(value.shape)}")
        if not value.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor, got dtype {value.dtype}")
        return float(value.detach())
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def check_positive_number(
    value: object, name: str, *, what: str = "number", tensor: bool = False
) -> float:
    """A finite number ``> 0`` (with ``tensor``, also a 0-d floating tensor); its value.

    ``TypeError`` for a wrong type (see :func:`check_real_scalar`; a tensor unless
    ``tensor``), ``ValueError`` for zero, negative, NaN or infinite values ("``name``
    must be a positive finite ``what``").
    """
    if isinstance(value, torch.Tensor) and not tensor:
        raise TypeError(f"{name} must be a real number, got Tensor (use a Python float)")
    x = check_real_scalar(value, name)
    if not (x > 0 and math.isfinite(x)):
        raise ValueError(f"{name} must be a positive finite {what}, got {value!r}")
    return x


def check_nonnegative_number(value: object, name: str) -> float:
    """A real number ``≥ 0`` (``inf`` allowed, NaN refused); its value as a float."""
    if isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a real number, got Tensor (use a Python float)")
    x = check_real_scalar(value, name)
    if not x >= 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")
    return x


def check_bool(value: object, name: str) -> bool:
    """Require a ``bool`` (``TypeError`` naming ``name`` otherwise; ``0``/``1`` refused)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> str:
    """One of the option strings ``choices``.

    ``TypeError`` for a non-string, ``ValueError`` for an unknown one (the message lists
    the choices).
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {choices} (a str), got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


# ---------------------------------------------------------------- observed targets
# Real values, binary labels, class indices, counts: shared by the likelihoods and
# the classification metrics.


def _vector(y: object, name: str) -> torch.Tensor:
    y = check_tensor(y, name)
    if y.ndim != 1:
        raise ValueError(f"{name} must have shape (n,), got {tuple(y.shape)}")
    if y.is_complex():
        raise TypeError(f"{name} must be real, got dtype {y.dtype}")
    if y.is_floating_point():
        if bool(torch.isnan(y).any()):
            raise ValueError(f"{name} contains NaN values")
        if bool(torch.isinf(y).any()):
            raise ValueError(f"{name} contains Inf values")
    return y


def _as_float(y: torch.Tensor) -> torch.Tensor:
    """Floating ``y`` unchanged; integer or bool ``y`` in the default floating dtype."""
    return y if y.is_floating_point() else y.to(torch.get_default_dtype())


def _require_integers(y: torch.Tensor, name: str, what: str) -> None:
    if y.is_floating_point() and not bool((y == torch.round(y)).all()):
        raise ValueError(f"{name} must hold {what}, got non-integer values")


def check_real_targets(y: object, name: str = "y") -> torch.Tensor:
    """Finite real targets of shape ``(n,)``; integer tensors become floating."""
    return _as_float(_vector(y, name))


def check_binary_labels(y: object, name: str = "y") -> torch.Tensor:
    """Binary labels in ``{0, 1}`` (bool, integer or floating), returned floating, ``(n,)``."""
    y = _vector(y, name)
    if y.dtype != torch.bool and not bool(((y == 0) | (y == 1)).all()):
        hint = " (map ±1 labels with (y + 1) / 2)" if bool((y == -1).any()) else ""
        raise ValueError(f"{name} must hold binary labels in {{0, 1}}{hint}")
    return _as_float(y)


def check_class_labels(y: object, num_classes: int, name: str = "y") -> torch.Tensor:
    """Class indices in ``{0, …, num_classes − 1}``, returned as int64, ``(n,)``.

    Integer tensors and floating tensors with integral values are accepted; bool is not.
    """
    y = _vector(y, name)
    if y.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer class indices, got dtype torch.bool")
    _require_integers(y, name, "integer class indices")
    if y.numel() and (bool((y < 0).any()) or bool((y >= num_classes).any())):
        lo, hi = y.min().item(), y.max().item()
        raise ValueError(
            f"{name} must hold class indices in {{0, …, {num_classes - 1}}}, got values "
            f"from {lo:g} to {hi:g}"
        )
    return y.long()


def check_counts(y: object, name: str = "y") -> torch.Tensor:
    """Non-negative integer counts (integer or integral floating), returned floating, ``(n,)``."""
    y = _vector(y, name)
    if y.dtype == torch.bool:
        raise TypeError(f"{name} must hold counts, got dtype torch.bool")
    _require_integers(y, name, "non-negative integer counts")
    if bool((y < 0).any()):
        raise ValueError(f"{name} must hold non-negative integer counts, got negative values")
    return _as_float(y)
