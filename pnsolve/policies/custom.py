"""Custom actions: wrap a user function of the solver state."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["Custom"]


class Custom(Policy):
    """Actions from a user function ``fn(state)`` or ``fn(state, generator)``.

    The function reads the (read-only) :class:`~pnsolve.SolverState` and returns the
    next action, shape ``(n,)``, or a block ``(n, m)``, with ``A``'s dtype and device.
    It keeps no memory in the state (``state.policy_memory`` is ``None``); a function
    that needs memory should be written as a :class:`~pnsolve.policies.Policy`.

    Parameters
    ----------
    fn
        The action function. It receives the solve's ``torch.Generator`` (the only
        allowed source of randomness) when it has a parameter named ``generator``
        (passed by keyword) or a second positional parameter without a default (or
        ``*args``); otherwise it is called as ``fn(state)``.
    pass_generator
        Override the signature inspection: ``True`` calls ``fn(state, generator)``,
        ``False`` calls ``fn(state)``.
    adaptive
        Whether ``fn`` may depend on ``b`` (through ``state.residual``,
        ``state.belief.mean``, ``state.b``, …). Default ``True``; declare ``False`` for
        a function of ``A``, fixed data and the generator only, and the solver marks
        its beliefs ``calibrated``.

    Examples
    --------
    Observe the five largest residual entries at once:

    >>> import torch, pnsolve as pn
    >>> def largest(state):
    ...     idx = state.residual.abs().topk(5).indices
    ...     return torch.eye(state.residual.shape[0], dtype=state.residual.dtype)[:, idx]
    >>> policy = pn.policies.Custom(largest)
    """

    def __init__(
        self,
        fn: Callable[..., torch.Tensor],
        *,
        pass_generator: bool | None = None,
        adaptive: bool = True,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        if pass_generator is not None and not isinstance(pass_generator, bool):
            raise TypeError(f"pass_generator must be a bool or None, got {pass_generator!r}")
        if not isinstance(adaptive, bool):
            raise TypeError(f"adaptive must be a bool, got {adaptive!r}")
        self.fn = fn
        self._adaptive = adaptive
        self._mode = _call_mode(fn) if pass_generator is None else (
            "positional" if pass_generator else "state"
        )  # fmt: skip

    @property
    def adaptive(self) -> bool:
        """As declared (default ``True``: a function of the state may read ``b``)."""
        return self._adaptive

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, None]:
        """Return ``(fn(state[, generator]), None)`` after checking the action's type and shape."""
        if self._mode == "keyword":
            S = self.fn(state, generator=generator)
        elif self._mode == "positional":
            S = self.fn(state, generator)
        else:
            S = self.fn(state)
        where = f"the action of {self!r} at iteration {state.iteration}"
        if not isinstance(S, torch.Tensor):
            raise TypeError(f"{where} must be a torch.Tensor, got {type(S).__name__}")
        n = state.residual.shape[0]
        if S.ndim not in (1, 2) or S.shape[0] != n or (S.ndim == 2 and S.shape[1] < 1):
            raise ValueError(f"{where} must have shape ({n},) or ({n}, m), got {tuple(S.shape)}")
        return S, None

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or repr(self.fn)
        return f"Custom(fn={name})" if self._adaptive else f"Custom(fn={name}, adaptive=False)"


def _call_mode(fn: Callable[..., object]) -> str:
    """``"keyword"``, ``"positional"`` or ``"state"``: how ``fn`` takes the generator."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # not introspectable (some builtins): fn(state)
        return "state"
    if any(p.name == "generator" and p.kind != p.POSITIONAL_ONLY for p in params):
        return "keyword"
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return "positional"
    if len(positional) >= 2 and positional[1].default is inspect.Parameter.empty:
        return "positional"
    return "state"
