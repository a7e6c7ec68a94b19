"""What :class:`~pnsolve.gp.ExactGP` and :class:`~pnsolve.gp.IterGP` share.

Both fit ``K̂ = K(X, X) + σ² I`` (kept as the operator ``A`` of the fit) and answer
``posterior(Xs, method=...)`` queries, with ``method="love"`` through a LOVE cache of
``K̂``; they differ in how ``K̂`` is solved and in their default method.

**Under change.** ``fit`` keeps its results in one frozen record, with the
:class:`~pnsolve.gp.fit_state.Provenance` of the data, kernel, noise and mean it was
computed from. Every query checks it first: when a hyperparameter changed since (an
optimiser step, ``k.lengthscale = …``, ``load_state_dict``, ``gp.noise = …``, another
kernel assigned), the model **fits again** on the same data with the current
hyperparameters and answers from that; when the training tensors were written in place
it refuses (:class:`~pnsolve.gp.fit_state.FitChangedError`). Posteriors and LOVE caches
from before the change refuse their on-demand parts and reuse.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TypeVar

import torch

from .._core.precision import full_float32
from ..kernels.grid_interpolation import GridInterpolation
from ..kernels.kernel import Kernel
from ._checks import check_bool, check_choice, check_inputs
from ._fitted import FitRecord, FittedModel
from .love import LoveCache, check_rank
from .love_posterior import LovePosterior, love_posterior, resolve_love_cache

__all__ = ["RegressionGP"]

_Record = TypeVar("_Record", bound=FitRecord)


class RegressionGP(FittedModel[_Record]):
    """Base of ExactGP and IterGP: fit records (:class:`FittedModel`), query checks, LOVE.

    Subclasses set ``kernel``, ``noise`` and ``mean``; their ``fit`` stores a frozen
    record through :meth:`_store`, and :meth:`_refit` repeats the fit on the record's
    data. Queries go through :meth:`_fitted` (the checked record), :meth:`_query`,
    :meth:`_love_posterior` and :meth:`build_love_cache` (public, shared by both).
    """

    kernel: Kernel

    def _sources(self) -> dict[str, object]:
        """The hyperparameter sources, with the kernel as given to ``fit`` (before binding).

        A SKI kernel is fitted as a bound copy (:meth:`_bind_kernel`); changes to the
        kernel the user holds (its ``base_kernel`` or ``grid_bounds`` replaced) are seen
        through it.
        """
        return {**super()._sources(), "given_kernel": getattr(self, "_given_kernel", None)}

    def _backend(self) -> str:
        return "auto"

    def _bind_kernel(self, X: torch.Tensor) -> None:
        """Fix the kernel's data-derived settings to ``X`` (``Kernel.bind``) for a fit.

        Rebinds from the kernel as given, unless ``self.kernel`` was replaced since the
        last fit (then the new kernel is the one given). A SKI grid that does not cover
        ``X`` is refused naming ``X``.
        """
        if self.kernel is not getattr(self, "_bound_kernel", None):
            self._given_kernel = self.kernel
        self.kernel = self._bound_kernel = self._given_kernel.bind(X)
        if isinstance(self.kernel, GridInterpolation):
            self.kernel.grid(X).check_covers(X, "X")

    def _check_test_inputs(self, Xs: torch.Tensor, X: torch.Tensor) -> None:
        """Refuse test inputs outside a SKI grid, naming ``Xs``."""
        if isinstance(self.kernel, GridInterpolation):
            self.kernel.grid(X).check_covers(Xs, "Xs")

    @abc.abstractmethod
    def _weights(self, record: _Record) -> torch.Tensor:
        """The representer weights ``(n,)`` of ``record`` (the mean of LOVE posteriors)."""

    def _require_fit(self) -> torch.Tensor:
        """The training inputs ``X`` ``(n, d)`` of the current fit (checked: :meth:`_fitted`)."""
        return self._fitted().X

    def _query(self, Xs: torch.Tensor, method: str, default: str) -> tuple[_Record, torch.Tensor]:
        """``(record, Xs)`` for a posterior query.

        The current fit's record, ``method`` checked to be ``default`` or ``"love"``,
        ``Xs`` checked against the training inputs.
        """
        record = self._fitted()
        check_choice(method, "method", (default, "love"))
        Xs = check_inputs(Xs, "Xs", record.X.shape[1], like=record.X)
        self._check_test_inputs(Xs, record.X)
        return record, Xs

    def _love_posterior(
        self,
        record: _Record,
        Xs: torch.Tensor,
        rank: int,
        probe: torch.Tensor | None,
        cache: LoveCache | None,
        math_var: Callable[[], torch.Tensor] | None = None,
        fit_calibrated: bool = True,
    ) -> LovePosterior:
        """The ``method="love"`` posterior at checked ``Xs``, mean from :meth:`_weights`.

        ``calibrated`` is the cache's, and ``False`` when ``fit_calibrated`` is (the
        representer weights come from an uncalibrated solve).
        """
        check_rank(rank)
        resolved = self._love_cache(record, rank, probe, Xs, cache)
        post = love_posterior(
            cache=resolved,
            kernel=self.kernel,
            X=record.X,
            Xs=Xs,
            weights=self._weights(record),
            offset=self.mean,
            backend=self._backend(),
            math_var=math_var,
            calibrated=resolved.calibrated and fit_calibrated,
        )
        return self._tie(post, record)

    @full_float32
    def build_love_cache(
        self,
        rank: int = 50,
        probe: torch.Tensor | None = None,
        Xs: torch.Tensor | None = None,
        *,
        calibrated: bool = False,
    ) -> LoveCache:
        """A LOVE cache of the fit's ``K̂`` to reuse across ``posterior(..., cache=...)`` calls.

        Parameters
        ----------
        rank
            Lanczos steps (``rank + 1`` products with ``K̂``, on the model's backend, so
            matrix-free for IterGP; capped at ``n``).
        probe
            Starting vector, shape ``(n,)``. Default: ``k(X, Xs)`` averaged over ``Xs``
            when ``Xs`` is given, else the centred targets ``y − μ`` (the Krylov space
            of CG on the training system).
        Xs
            Representative test inputs, shape ``(t, d)``, for the default probe.
        calibrated
            Declare that a given ``probe`` does not depend on ``y``. The cache (and the
            posteriors from it) are marked ``calibrated`` for the default probe from
            ``Xs`` automatically, never for the targets probe, and for a given
            ``probe`` only when declared here.

        Returns
        -------
        LoveCache
            The cache; the model is not modified (keep the cache yourself).
        """
        record = self._fitted()
        check_rank(rank)
        if Xs is not None:
            Xs = check_inputs(Xs, "Xs", record.X.shape[1], like=record.X)
            self._check_test_inputs(Xs, record.X)
        check_bool(calibrated, "calibrated")
        return self._love_cache(record, rank, probe, Xs, None, calibrated)

    def _love_cache(
        self,
        record: _Record,
        rank: int,
        probe: torch.Tensor | None,
        Xs: torch.Tensor | None,
        cache: LoveCache | None,
        calibrated: bool = False,
    ) -> LoveCache:
        return resolve_love_cache(
            record.A,
            self.kernel,
            record.X,
            rank=rank,
            probe=probe,
            Xs=Xs,
            backend=self._backend(),
            residual=lambda: record.y - self.mean,
            weights=self._weights(record),
            cache=cache,
            calibrated=calibrated,
        )
