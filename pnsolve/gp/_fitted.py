"""The fit-record protocol of the GP models (see :mod:`pnsolve.gp.fit_state`)."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

from ..linops.base import LinearOperator
from .fit_state import Provenance, tie
from .posterior import GaussianPosterior

__all__ = ["FitRecord", "FittedModel", "readout"]

_Posterior = TypeVar("_Posterior", bound=GaussianPosterior)


@dataclass(frozen=True)
class FitRecord:
    """What a model's ``fit`` computed, and from what (never modified).

    The part every model's record has; each model's record adds its own results
    (:class:`~pnsolve.gp.exact.ExactFitState`, :class:`~pnsolve.gp.itergp.IterGPFitState`,
    :class:`~pnsolve.gp.affine_gp.AffineGPFitState`).

    Attributes
    ----------
    provenance
        Data and hyperparameters of the fit (:class:`~pnsolve.gp.fit_state.Provenance`).
    X, y
        Training inputs ``(n, d)`` and targets ``(n,)``.
    A
        The training operator ``K̂ = K(X, X) + σ² I``, shape ``(n, n)``.
    """

    provenance: Provenance
    X: torch.Tensor
    y: torch.Tensor
    A: LinearOperator


_Record = TypeVar("_Record", bound=FitRecord)


class _Readout:
    """A read-only attribute reading ``path`` off the model's checked fit record.

    Reading it calls the model's ``_fitted()`` (so a stale fit is refitted, or refused,
    first) and follows the dotted ``path`` from the record.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.__doc__ = f"``{path}`` of the current fit record (refitted first if stale)."

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, model: Any, owner: type | None = None) -> Any:
        if model is None:
            return self
        value = model._fitted()
        for part in self.path.split("."):
            value = getattr(value, part)
        return value

    def __set__(self, model: Any, value: Any) -> None:
        raise AttributeError(f"{self.name} is read from the fit; call fit(X, y) to change it")


def readout(path: str) -> Any:
    """A model attribute that reads ``path`` (dotted) off the checked fit record.

    Use as ``belief: GaussianSolutionBelief = readout("belief")`` followed by the
    attribute's docstring; every read goes through the model's ``_fitted()``.
    """
    return _Readout(path)


class FittedModel(abc.ABC, Generic[_Record]):
    """A GP model whose ``fit`` keeps one frozen record, checked by every query.

    Subclasses set ``noise`` and ``mean`` (and ``kernel``); ``fit`` stores a frozen
    record (a :class:`FitRecord`) through :meth:`_store`, and :meth:`_refit` repeats the
    fit on the record's data with the current hyperparameters. :meth:`_fitted` is the
    checked record every query starts from; :meth:`_tie` makes posteriors refuse their
    on-demand parts once stale.
    """

    kernel: Any
    noise: float | torch.Tensor
    mean: float
    _record: _Record | None = None

    def _sources(self) -> dict[str, object]:
        """The hyperparameter sources a fit depends on, by name."""
        return {"kernel": self.kernel, "noise": self.noise, "mean": self.mean}

    def _store(self, record: _Record) -> None:
        """Keep ``record`` (its provenance recorded from :meth:`_sources` now)."""
        self._record = record

    def _provenance(self, X: torch.Tensor, y: torch.Tensor) -> Provenance:
        """The provenance of a fit on ``X, y`` with the current sources."""
        return Provenance.record({"X": X, "y": y}, self._sources())

    @abc.abstractmethod
    def _refit(self, record: _Record) -> None:
        """Fit again on ``record``'s data with the current hyperparameters."""

    def _fitted(self) -> _Record:
        """The record of the last fit, refitted first if a hyperparameter changed.

        Raises ``RuntimeError`` before a fit and
        :class:`~pnsolve.gp.fit_state.FitChangedError` when the training data were
        written in place since.
        """
        fitted = self._record
        if fitted is None:
            raise RuntimeError("call fit(X, y) before asking for a posterior")
        if fitted.provenance.check(self._sources(), refit=lambda: self._refit(fitted)):
            refitted = self._record
            assert refitted is not None  # _refit stores a record
            return refitted
        return fitted

    @property
    def fit_state(self) -> _Record:
        """The record of the current fit (refitted first if hyperparameters changed)."""
        return self._fitted()

    def _tie(self, post: _Posterior, record: _Record) -> _Posterior:
        """Make ``post`` refuse its on-demand parts once ``record`` is no longer current."""
        return tie(post, record.provenance, self._current_provenance, self._sources)

    def _current_provenance(self) -> Provenance | None:
        return None if self._record is None else self._record.provenance

    @property
    def X(self) -> torch.Tensor | None:
        """Training inputs of the last fit, shape ``(n, d)`` (``None`` before a fit)."""
        return None if self._record is None else self._record.X

    y: torch.Tensor = readout("y")
    """Training targets of the last fit, shape ``(n,)``."""

    A: LinearOperator = readout("A")
    """The training operator ``K̂`` of the (current) fit, shape ``(n, n)``."""
