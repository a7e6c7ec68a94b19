"""What a training log records of a kernel's hyperparameters at each step."""

from __future__ import annotations

import math

from ...kernels.base import StationaryKernel
from ...kernels.kernel import Kernel
from ...kernels.positive import parameter_label, softplus

__all__ = ["hyperparameter_summary", "named_values"]


def named_values(kernel: Kernel) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """Every positive parameter's values, ``(name, values)`` in ``named_parameters()`` order.

    Names drop the ``raw_`` storage prefix and the ``kernels.`` of expressions, e.g.
    ``("0.1.lengthscale", (0.7,))`` for the lengthscale of the second factor of the
    first term of a sum.
    """
    out = []
    for name, raw in kernel.named_parameters():
        label = parameter_label(name)
        values = softplus(raw.detach()).reshape(-1).tolist()
        out.append((label, tuple(float(v) for v in values)))
    return tuple(out)


def hyperparameter_summary(
    kernel: Kernel, every_parameter: bool
) -> tuple[tuple[float, ...], float, tuple[tuple[str, tuple[float, ...]], ...]]:
    """``(lengthscales, outputscale, named values)`` of a :class:`StepRecord`.

    Stationary kernels give their lengthscales and outputscale (others ``()`` and NaN);
    the named values of every positive parameter when ``every_parameter`` (a kernel the
    caller chose) and ``()`` for the default Matérn model (its two fields say it all).
    """
    if isinstance(kernel, StationaryKernel):
        ls = tuple(float(v) for v in kernel.lengthscale.detach().reshape(-1))
        os_ = float(kernel.outputscale.detach())
    else:
        ls, os_ = (), math.nan
    return ls, os_, named_values(kernel) if every_parameter else ()
