"""The fit-record protocol of the GP models (see :mod:`pnsolve.gp.fit_state`)."""

from __future__ import annotations

import abc
from typing import Any

import torch

from ..linops.base import LinearOperator
from .fit_state import Provenance, stale_guard
from .posterior import GaussianPosterior

__all__ = ["FittedModel"]


class FittedModel(abc.ABC):
    """A GP model whose ``fit`` keeps one frozen record, checked by every query.

    Subclasses set ``noise`` and ``mean`` (and ``kernel``); ``fit`` stores a frozen
    record (a dataclass with at least ``provenance``, ``X``, ``y`` and ``A``) through
    :meth:`_store`, and :meth:`_refit` repeats the fit on the record's data with the
    current hyperparameters. :meth:`_fitted` is the checked record every query starts
    from; :meth:`_tie` makes posteriors refuse their on-demand parts once stale.
    """

    kernel: Any
    noise: float | torch.Tensor
    mean: float
    _record: Any = None

    def _sources(self) -> dict[str, object]:
        """The hyperparameter sources a fit depends on, by name."""
        return {"kernel": self.kernel, "noise": self.noise, "mean": self.mean}

    def _store(self, record: Any) -> None:
        """Keep ``record`` (its provenance recorded from :meth:`_sources` now)."""
        self._record = record

    def _provenance(self, X: torch.Tensor, y: torch.Tensor) -> Provenance:
        """The provenance of a fit on ``X, y`` with the current sources."""
        return Provenance.record({"X": X, "y": y}, self._sources())

    @abc.abstractmethod
    def _refit(self, record: Any) -> None:
        """Fit again on ``record``'s data with the current hyperparameters."""

    def _fitted(self) -> Any:
        """The record of the last fit, refitted first if a hyperparameter changed.

        Raises ``RuntimeError`` before a fit and
        :class:`~pnsolve.gp.fit_state.FitChangedError` when the training data were
        written in place since.
        """
        record = self._record
        if record is None:
            raise RuntimeError("call fit(X, y) before asking for a posterior")
        if record.provenance.check(self._sources(), refit=lambda: self._refit(record)):
            record = self._record
        return record

    def _tie(self, post: GaussianPosterior, record: Any) -> GaussianPosterior:
        """Make ``post`` refuse its on-demand parts once ``record`` is no longer current."""
        provenance = record.provenance

        def now() -> Provenance | None:
            return None if self._record is None else self._record.provenance

        post.tie_to(stale_guard(provenance, now, self._sources))
        return post

    @property
    def X(self) -> torch.Tensor | None:
        """Training inputs of the last fit, shape ``(n, d)`` (``None`` before a fit)."""
        return None if self._record is None else self._record.X

    @property
    def y(self) -> torch.Tensor:
        """Training targets of the last fit, shape ``(n,)``."""
        return self._fitted().y

    @property
    def A(self) -> LinearOperator:
        """The training operator ``K̂`` of the (current) fit, shape ``(n, n)``."""
        return self._fitted().A
