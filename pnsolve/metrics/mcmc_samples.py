"""Checked MCMC draws ``(chains, draws, parameters)`` and their NumPy round trip."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from .._core.validation import check_finite, check_real_dtype

__all__ = ["MIN_CHAINS", "MIN_DRAWS", "Backend", "as_samples", "from_numpy", "to_numpy"]

Backend = Literal["auto", "arviz", "fallback"]

#: Fewest draws per chain the diagnostics accept (split chains keep two draws per half).
MIN_DRAWS = 4
#: Fewest chains for between-chain diagnostics (PSRF, split-R̂).
MIN_CHAINS = 2


def as_samples(samples: object, *, min_chains: int) -> torch.Tensor:
    """``samples`` as a detached floating tensor of shape ``(chains, draws, parameters)``."""
    if isinstance(samples, torch.Tensor):
        x = samples.detach()
    else:
        try:
            # NumPy input is host data: it stays on the CPU (the diagnostics run in NumPy)
            x = torch.as_tensor(np.asarray(samples), device="cpu")
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                "samples must be a torch tensor or numpy array of numbers with shape "
                f"(chains, draws, parameters), got {type(samples).__name__}"
            ) from err
    if x.dtype == torch.bool:
        raise TypeError("samples must hold real numbers, got dtype torch.bool")
    check_real_dtype(x.dtype, "samples")
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    if x.ndim != 3 or x.shape[2] == 0:
        raise ValueError(
            "samples must have shape (chains, draws, parameters) with at least one "
            f"parameter, got {tuple(x.shape)} (one parameter: samples[..., None])"
        )
    chains, draws, _ = x.shape
    if chains < min_chains:
        what = "between-chain diagnostics need" if min_chains > 1 else "need"
        raise ValueError(f"samples has {chains} chain(s); {what} at least {min_chains}")
    if draws < MIN_DRAWS:
        raise ValueError(f"samples has {draws} draws per chain; at least {MIN_DRAWS} needed")
    return check_finite(x, "samples")


def to_numpy(x: torch.Tensor) -> np.ndarray:
    """``x`` as a float64 NumPy array."""
    return x.detach().cpu().to(torch.float64).numpy()  # host round trip: ArviZ / NumPy


def from_numpy(values: object, like: torch.Tensor) -> torch.Tensor:
    """Per-parameter ``values`` back as a tensor ``(parameters,)`` with ``like``'s dtype/device."""
    out = np.asarray(values, dtype=np.float64).reshape(like.shape[2])
    return torch.as_tensor(out, dtype=like.dtype, device=like.device)
