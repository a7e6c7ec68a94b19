"""Kernel hyperparameter values: the softplus map, positivity checks, one device."""

from __future__ import annotations

import torch

__all__ = [
    "inv_softplus",
    "one_device",
    "parameter_label",
    "positive_value",
    "set_positive_",
    "softplus",
]


def softplus(x: torch.Tensor) -> torch.Tensor:
    """``log(1 + eˣ)`` to rounding for every ``x`` (gradient ``sigmoid(x)``).

    ``torch.nn.functional.softplus`` returns ``x`` itself above its threshold 20, an
    error of ``log1p(e⁻ˣ) ≈ 2e-9`` there: visible in float64 hyperparameters.
    """
    return torch.logaddexp(x, torch.zeros_like(x))


def inv_softplus(y: torch.Tensor) -> torch.Tensor:
    """Inverse of ``softplus``: ``x = y + log(−expm1(−y))`` for ``y > 0``."""
    return y + torch.log(-torch.expm1(-y))


def one_device(**values: tuple[torch.Tensor, object]) -> list[torch.Tensor]:
    """Checked hyperparameters ``name=(tensor, as_given)`` on one device (one module).

    A value given as a Python number joins the device of those given as tensors; tensors
    given on two devices are refused, naming both.
    """
    given = [(name, t.device) for name, (t, raw) in values.items() if isinstance(raw, torch.Tensor)]
    for name, device in given[1:]:
        if device != given[0][1]:
            raise ValueError(
                f"{given[0][0]} is on device {given[0][1]} but {name} on {device}; give a "
                "kernel's hyperparameters on one device"
            )
    device = given[0][1] if given else next(iter(values.values()))[0].device
    return [t.to(device) for t, _ in values.values()]


def positive_value(value: float | torch.Tensor, name: str) -> torch.Tensor:
    """``value`` as a float64 tensor (the storage dtype of hyperparameters), checked > 0."""
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            raise TypeError(f"{name} must be real, got {value.dtype}")
        t = value.detach().to(torch.float64, copy=True)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        # a module parameter from a Python number: torch's default device, as in torch.nn
        t = torch.tensor(float(value), dtype=torch.float64, device=torch.get_default_device())
    else:
        raise TypeError(f"{name} must be a float or a tensor, got {type(value).__name__}")
    if not bool(torch.isfinite(t).all()) or not bool((t > 0).all()):
        raise ValueError(f"{name} must be positive and finite, got {t.tolist()}")
    return t


def set_positive_(raw: torch.Tensor, value: float | torch.Tensor, name: str) -> None:
    """Store a positive ``value`` (a scalar or ``raw``'s shape) in ``raw`` as ``inv_softplus``.

    In place and without autograd (a parameter's ``.data`` changes, as an optimiser step
    would); errors name ``name``.
    """
    v = positive_value(value, name).to(raw.dtype)
    if v.shape != raw.shape and v.ndim != 0:
        raise ValueError(f"{name} must have shape {tuple(raw.shape)}, got {tuple(v.shape)}")
    with torch.no_grad():
        raw.copy_(inv_softplus(v).expand_as(raw))


def parameter_label(name: str) -> str:
    """The value's name for a raw parameter's ``named_parameters()`` name.

    Drops the ``raw_`` storage prefix and the ``kernels.`` of expressions:
    ``"kernels.0.kernels.1.raw_period"`` → ``"0.1.period"`` (the period of the second
    factor of the first term).
    """
    return name.replace("kernels.", "").replace("raw_", "")
