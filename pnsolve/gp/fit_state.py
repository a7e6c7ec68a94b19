"""What a fit was computed from, and the check every query makes against it.

A GP model's ``fit`` computes a state (a Cholesky factor, a solver's belief, a Newton
mode, variational parameters) from the training data and from the hyperparameters of
the kernel, the noise and the likelihood. Those live outside the model and change under
it: an optimiser step on ``-gp.log_marginal_likelihood()``, ``k.lengthscale = 0.5``,
``load_state_dict``, ``gp.noise = 0.2``. A :class:`Provenance` recorded by ``fit`` names
what the state came from; :meth:`Provenance.changes` says what differs now, and the
model then recomputes (ExactGP, IterGP, AffineGP, IterNCGP: ``fit`` again on the same
data) or refuses (QSGP, whose fit is a training run), never answers from the old state.

The check is cheap and needs no hashing of ``n``-sized data: hyperparameters (every
parameter and buffer of a kernel module, the tensors and numbers of a likelihood, the
noise) are small and compared by value against copies taken at fit time, which catches
in-place optimiser updates, ``.data`` writes and ``load_state_dict`` alike. The
training data are the model's own copies (:func:`own_copy`: a caller's later writes do
not reach them); their version counters catch writes to the copies themselves
(``gp.X.mul_(2)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from .._core.statefile import version_counter

__all__ = ["FitChangedError", "Provenance", "own_copy", "snapshot", "stale_guard", "tie"]

#: Snapshot leaves: plain values compared by ``==``.
_PLAIN = (int, float, bool, str, bytes, type(None))


class FitChangedError(RuntimeError):
    """A query found the state of the last ``fit`` stale and the model does not recompute.

    Raised by models that refuse (QSGP), by posteriors and caches that outlived their
    fit, and by every model when its training data were modified in place.
    """


def snapshot(value: object, _depth: int = 0) -> object:
    """A comparable copy of a hyperparameter source (kernel, likelihood, noise, number).

    Modules: every parameter and buffer (cloned) and their plain settings; tensors:
    cloned; plain numbers and strings: themselves; other objects: their attributes one
    level down (a likelihood's noise tensor or number). Anything else compares by identity.
    """
    if isinstance(value, torch.Tensor):
        return ("tensor", value.detach().clone())
    if isinstance(value, _PLAIN):
        return ("plain", value)
    if isinstance(value, nn.Module):
        tensors = tuple(
            (name, t.detach().clone())
            for name, t in (*value.named_parameters(), *value.named_buffers())
        )
        settings = tuple(
            (m_name, key, v)
            for m_name, module in value.named_modules()
            for key, v in sorted(vars(module).items())
            if not key.startswith("_") and isinstance(v, (*_PLAIN, tuple)) and key != "training"
        )
        return ("module", tensors, settings)
    if isinstance(value, tuple | list) and _depth < 2:
        return ("seq", tuple(snapshot(v, _depth + 1) for v in value))
    if _depth < 2 and hasattr(value, "__dict__"):
        return (
            "object",
            type(value),
            tuple((k, snapshot(v, _depth + 1)) for k, v in sorted(vars(value).items())),
        )
    return ("identity", id(value))


def _same(a: object, b: object) -> bool:
    """Whether two snapshots agree (tensors: dtype, shape and every value; NaN equal)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
            return False
        return bool(torch.equal(a, b)) or bool(
            a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
            and torch.equal(a.nan_to_num(), b.nan_to_num())
        )  # fmt: skip
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a is b or (type(a) is type(b) and a == b)


def _changed_parts(name: str, old: object, new: object) -> str:
    """``"kernel (raw_lengthscale)"``: which parameters of a module source differ."""
    if (
        isinstance(old, tuple) and isinstance(new, tuple) and old[:1] == new[:1] == ("module",)
        and len(old[1]) == len(new[1])
    ):  # fmt: skip
        parts = [o[0] for o, n in zip(old[1], new[1]) if not _same(o, n)]
        if not _same(old[2], new[2]):
            parts.append("settings")
        if parts:
            return f"{name} ({', '.join(parts)})"
    return name


@dataclass(frozen=True)
class Provenance:
    """What a fit was computed from: data stamps, hyperparameter sources and their copies.

    Attributes
    ----------
    data
        ``(name, tensor, version)`` of the training data: the tensors themselves and
        their version counters at fit time.
    sources
        ``(name, object, snapshot)``: the kernel, noise, likelihood, mean, ... as given
        to the fit (identity) and a copy of their values (:func:`snapshot`).
    """

    data: tuple[tuple[str, torch.Tensor, int], ...]
    sources: tuple[tuple[str, object, object], ...]

    @classmethod
    def record(cls, data: Mapping[str, torch.Tensor], sources: Mapping[str, object]) -> Provenance:
        """Record the provenance of a fit now (copies the hyperparameters, not the data)."""
        return cls(
            data=tuple((k, t, version_counter(t)) for k, t in data.items()),
            sources=tuple((k, v, snapshot(v)) for k, v in sources.items()),
        )

    def data_changes(self) -> list[str]:
        """The training tensors written in place since the fit."""
        return [name for name, t, version in self.data if version_counter(t) != version]

    def changes(self, sources: Mapping[str, object]) -> list[str]:
        """What differs between the fit's sources and the model's ``sources`` now.

        Returns names such as ``"kernel (raw_lengthscale)"``, ``"noise"``, ``"kernel
        (replaced)"``; empty when nothing changed. Data written in place are reported by
        :meth:`data_changes`.
        """
        out: list[str] = []
        for name, obj, snap in self.sources:
            now = sources.get(name, _MISSING)
            if now is _MISSING:
                out.append(f"{name} (removed)")
            elif (
                now is not obj and not isinstance(obj, _PLAIN) and not isinstance(obj, torch.Tensor)
            ):
                out.append(f"{name} (replaced)")
            else:
                new = snapshot(now)
                if not _same(snap, new):
                    out.append(_changed_parts(name, snap, new))
        return out

    def check(
        self,
        sources: Mapping[str, object],
        *,
        refit: Callable[[], Any] | None,
        what: str = "fit(X, y)",
    ) -> bool:
        """Raise or ask for a refit when the fit is stale; ``True`` when ``refit`` ran.

        Parameters
        ----------
        sources
            The model's hyperparameter sources now (same names as at :meth:`record`).
        refit
            Recomputes the state from the same data with the current hyperparameters
            (the model's policy), or ``None`` to refuse.
        what
            The call to suggest in the error message.

        Raises
        ------
        FitChangedError
            When the training data were written in place (always), or the
            hyperparameters changed and ``refit`` is ``None``.
        """
        written = self.data_changes()
        if written:
            raise FitChangedError(
                f"the training data ({', '.join(written)}) were modified in place since "
                f"fit: call {what} again"
            )
        changed = self.changes(sources)
        if not changed:
            return False
        if refit is None:
            raise FitChangedError(
                f"hyperparameters changed since fit ({'; '.join(changed)}): call {what} again"
            )
        refit()
        return True


_MISSING = object()
_T = TypeVar("_T")
_P = TypeVar("_P")


def own_copy(x: _T) -> _T:
    """A private copy of training data for a fit record (tensors detached; NumPy copied).

    The models keep their own copy, so a caller's later in-place write (``X.mul_(2)``,
    ``X.data[...] = …``, a NumPy array changed after it was passed) never reaches a
    fitted state; anything else is returned as it is (the model's checks refuse it).
    """
    if isinstance(x, torch.Tensor):
        return x.detach().clone()  # type: ignore[return-value]
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True)  # type: ignore[return-value]
    return x


def stale_guard(
    provenance: Provenance,
    now: Callable[[], Provenance | None],
    sources: Callable[[], Mapping[str, object]],
) -> Callable[[], None]:
    """A check for a result computed from the fit of ``provenance`` (a posterior).

    The returned callable raises :class:`FitChangedError` once the model was fitted
    again (``now()`` is another provenance: results computed while one fit iterates
    share its provenance) or its data or hyperparameters changed since.
    """

    def current() -> None:
        if now() is not provenance:
            raise FitChangedError(
                "the model was fitted again since this posterior was computed: "
                "query posterior(Xs) again"
            )
        changed = provenance.data_changes() or provenance.changes(sources())
        if changed:
            raise FitChangedError(
                f"the model changed since this posterior was computed "
                f"({'; '.join(changed)}): query posterior(Xs) again"
            )

    return current


def tie(
    post: _P,
    provenance: Provenance,
    now: Callable[[], Provenance | None],
    sources: Callable[[], Mapping[str, object]],
) -> _P:
    """``post`` (a posterior with ``tie_to``) tied to the fit of ``provenance``.

    Its on-demand parts then refuse once that fit is stale (:func:`stale_guard`).
    """
    post.tie_to(stale_guard(provenance, now, sources))  # type: ignore[attr-defined]
    return post
