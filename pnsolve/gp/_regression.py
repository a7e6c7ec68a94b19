"""What :class:`~pnsolve.gp.ExactGP` and :class:`~pnsolve.gp.IterGP` share.

Both fit ``K̂ = K(X, X) + σ² I`` (kept as the operator ``self.A``) and answer
``posterior(Xs, method=...)`` queries, with ``method="love"`` through a LOVE cache of
``K̂``; they differ in how ``K̂`` is solved and in their default method.
"""

from __future__ import annotations

import abc
from collections.abc import Callable

import torch

from ..kernels.grid_interpolation import GridInterpolation
from ..kernels.kernel import Kernel
from ..linops.base import LinearOperator
from ._checks import check_inputs
from .love import LoveCache, check_rank
from .love_posterior import love_posterior, resolve_love_cache
from .posterior import GaussianPosterior

__all__ = ["RegressionGP"]


class RegressionGP(abc.ABC):
    """Base of the regression models: fitted data, query checks and LOVE caches.

    Subclasses set ``kernel``, ``mean`` and ``X`` (``None`` until fitted) and, in
    ``fit``, ``y`` and ``A`` (the operator ``K̂``); :meth:`_backend` names the
    :class:`~pnsolve.kernels.KernelMatrix` backend of the LOVE products. Their
    ``posterior`` and ``build_love_cache`` go through :meth:`_query`,
    :meth:`_love_posterior` and :meth:`_build_love_cache`.
    """

    kernel: Kernel
    mean: float
    X: torch.Tensor | None
    y: torch.Tensor
    A: LinearOperator

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
    def _weights(self) -> torch.Tensor:
        """The fitted representer weights ``(n,)`` (the mean of LOVE posteriors)."""

    def _require_fit(self) -> torch.Tensor:
        """The training inputs ``X`` ``(n, d)``; raises if :meth:`fit` was not called."""
        if self.X is None:
            raise RuntimeError("call fit(X, y) before asking for a posterior")
        return self.X

    def _query(
        self, Xs: torch.Tensor, method: str, default: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(X, Xs)`` for a posterior query: fitted, ``method`` in ``(default, "love")``."""
        X = self._require_fit()
        if method not in (default, "love"):
            raise ValueError(f"method must be {default!r} or 'love', got {method!r}")
        Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        self._check_test_inputs(Xs, X)
        return X, Xs

    def _love_posterior(
        self,
        Xs: torch.Tensor,
        rank: int,
        probe: torch.Tensor | None,
        cache: LoveCache | None,
        weights: torch.Tensor,
        math_var: Callable[[], torch.Tensor] | None = None,
        fit_calibrated: bool = True,
    ) -> GaussianPosterior:
        """The ``method="love"`` posterior at checked ``Xs`` with representer ``weights``.

        ``calibrated`` is the cache's, and ``False`` when ``fit_calibrated`` is (the
        ``weights`` come from an uncalibrated solve).
        """
        check_rank(rank)
        resolved = self._love_cache(rank, probe, Xs, cache)
        return love_posterior(
            cache=resolved,
            kernel=self.kernel,
            X=self._require_fit(),
            Xs=Xs,
            weights=weights,
            offset=self.mean,
            backend=self._backend(),
            math_var=math_var,
            calibrated=resolved.calibrated and fit_calibrated,
        )

    def _build_love_cache(
        self,
        rank: int,
        probe: torch.Tensor | None,
        Xs: torch.Tensor | None,
        calibrated: bool = False,
    ) -> LoveCache:
        """``build_love_cache``: a LOVE cache of ``K̂ = self.A``, the model not modified."""
        X = self._require_fit()
        check_rank(rank)
        if Xs is not None:
            Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
            self._check_test_inputs(Xs, X)
        if not isinstance(calibrated, bool):
            raise TypeError(f"calibrated must be a bool, got {calibrated!r}")
        return self._love_cache(rank, probe, Xs, None, calibrated)

    def _love_cache(
        self,
        rank: int,
        probe: torch.Tensor | None,
        Xs: torch.Tensor | None,
        cache: LoveCache | None,
        calibrated: bool = False,
    ) -> LoveCache:
        return resolve_love_cache(
            self.A,
            self.kernel,
            self._require_fit(),
            rank=rank,
            probe=probe,
            Xs=Xs,
            backend=self._backend(),
            residual=lambda: self.y - self.mean,
            weights=self._weights(),
            cache=cache,
            calibrated=calibrated,
        )
