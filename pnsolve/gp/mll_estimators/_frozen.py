"""Helpers for the frozen random draws that make warm starts possible."""

from __future__ import annotations

import torch

from ..._core.validation import require_generator as _require_generator

__all__ = ["FrozenDraws", "check_frozen_like", "load_tensors", "require_generator"]


def require_generator(generator: object, name: str = "generator") -> torch.Generator:
    """Require a ``torch.Generator`` (the estimators' only source of randomness)."""
    return _require_generator(generator, name, hint="the only source of randomness")


def check_frozen_like(frozen: torch.Tensor, X: torch.Tensor, what: str) -> None:
    """Require ``X`` to have the number of rows, dtype and device of the frozen draws."""
    n = frozen.shape[0]
    if X.shape[0] != n:
        raise ValueError(
            f"X has {X.shape[0]} rows but the frozen {what} were drawn for n = {n}; "
            "call resample() to draw new ones for this data set"
        )
    if X.dtype != frozen.dtype:
        raise TypeError(
            f"X has dtype {X.dtype} but the frozen {what} are {frozen.dtype}; "
            "call resample() or cast X"
        )
    if X.device != frozen.device:
        raise ValueError(
            f"X is on device {X.device} but the frozen {what} are on {frozen.device}; "
            "call resample() or move X"
        )


def load_tensors(
    state: dict[str, torch.Tensor], shapes: dict[str, tuple[int | None, ...]]
) -> dict[str, torch.Tensor]:
    """Check a state dict's keys and shapes (``None`` = any size), return detached clones.

    Raises
    ------
    TypeError
        If ``state`` is not a dict of tensors.
    ValueError
        For missing/unexpected keys, wrong shapes or inconsistent dtypes/devices.
    """
    if not isinstance(state, dict):
        raise TypeError(f"state_dict must be a dict, got {type(state).__name__}")
    extra = set(state) - set(shapes) - {"generator_state"}
    missing = set(shapes) - set(state)
    if extra or missing:
        raise ValueError(
            f"state_dict keys do not match: missing {sorted(missing)}, unexpected {sorted(extra)}"
        )
    out: dict[str, torch.Tensor] = {}
    for key, shape in shapes.items():
        t = state[key]
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"state_dict[{key!r}] must be a torch.Tensor, got {type(t).__name__}")
        if t.ndim != len(shape) or any(
            want is not None and got != want for got, want in zip(t.shape, shape)
        ):
            raise ValueError(
                f"state_dict[{key!r}] has shape {tuple(t.shape)}, expected "
                f"{tuple('*' if s is None else s for s in shape)}"
            )
        out[key] = t.detach().clone()
    first = next(iter(out.values()))
    for key, t in out.items():
        if t.dtype != first.dtype or t.device != first.device:
            raise ValueError(f"state_dict[{key!r}] has another dtype/device than the others")
    return out


class FrozenDraws:
    """Mixin of the stochastic estimators: draws frozen until :meth:`resample`.

    Subclasses hold ``self._generator`` and implement :meth:`_clear_draws`.
    """

    _generator: torch.Generator

    def _clear_draws(self) -> None:
        raise NotImplementedError

    def resample(self, generator: torch.Generator | None = None) -> None:
        """Forget the frozen draws; the next ``targets`` call draws new ones.

        Parameters
        ----------
        generator
            Use this generator from now on (default: keep the current one).
        """
        if generator is not None:
            self._generator = require_generator(generator)
        self._clear_draws()
