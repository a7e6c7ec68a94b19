"""IterGP: GP regression whose posterior includes the uncertainty left by a finite solve."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ..beliefs.gaussian_solution import GaussianSolutionBelief
from ..kernels.base import StationaryKernel
from ..kernels.kernel_matrix import KernelMatrix
from ..linops.base import LinearOperator
from ..linops.scaled_identity import ScaledIdentity
from ..policies.base import Policy
from ..solvers.solver import ProbabilisticLinearSolver
from ..solvers.state import SolveInfo, SolverState
from ..stopping.base import StoppingCriterion
from ._checks import check_inputs, check_noise, check_targets
from .belief_posterior import belief_posterior
from .love import LoveCache, check_rank
from .love_posterior import love_posterior, resolve_love_cache
from .posterior import GaussianPosterior

__all__ = ["IterGP"]


class IterGP:
    """Computation-aware GP regression (Wenger et al.; DESIGN §5).

    :meth:`fit` runs the probabilistic linear solver on ``K̂ = K(X, X) + σ² I`` for the
    representer weights ``v* = K̂⁻¹ (y − μ)`` under the inverse prior. With the
    solver's belief ``v ~ N(v_i, K̂⁻¹ − C_i)`` the posterior at test inputs is

    * mean ``μ + k(x, X) v_i``,
    * covariance ``k(x, x') − k(x, X) C_i k(X, x')`` — the *combined* uncertainty:
      mathematical (the exact GP's) plus computational ``k(x, X)(K̂⁻¹ − C_i)k(X, x')``.

    The combined variance is cheap (``C_i = V Vᵀ`` has rank ``i``); its split needs
    exact solves and is computed on demand (``posterior.math_var``). With a full budget
    ``C_n = K̂⁻¹`` and the exact GP is reproduced; the variance never increases with
    the budget.

    Parameters
    ----------
    kernel
        A :class:`~pnsolve.kernels.StationaryKernel`.
    noise
        Observation-noise variance ``σ² > 0``.
    policy
        Action policy, e.g. ``pn.policies.CG()``.
    stopping
        Stopping criterion, e.g. ``pn.stopping.MaxIterations(100)``.
    mean
        Constant prior mean ``μ``.
    backend
        :class:`~pnsolve.kernels.KernelMatrix` backend: ``"auto"`` (default), ``"dense"``,
        ``"chunked"`` (matrix-free) or ``"keops"``.
    """

    def __init__(
        self,
        kernel: StationaryKernel,
        noise: float,
        policy: Policy,
        stopping: StoppingCriterion,
        mean: float = 0.0,
        *,
        backend: str = "auto",
    ) -> None:
        if not isinstance(kernel, StationaryKernel):
            raise TypeError(f"kernel must be a pnsolve kernel, got {type(kernel).__name__}")
        self.kernel = kernel
        self.noise = check_noise(noise)
        self.solver = ProbabilisticLinearSolver(policy, stopping)
        self.mean = float(mean)
        self.backend = backend
        self.X: torch.Tensor | None = None

    # ------------------------------------------------------------------ fitting
    def system(self, X: torch.Tensor) -> LinearOperator:
        """``K̂ = K(X, X) + σ² I`` as a (matrix-free unless ``backend="dense"``) operator."""
        K = KernelMatrix(self.kernel, X, backend=self.backend)
        return K + ScaledIdentity(X.shape[0], self.noise, dtype=X.dtype, device=X.device)

    def fit(
        self, X: torch.Tensor, y: torch.Tensor, generator: torch.Generator | None = None
    ) -> IterGP:
        """Run the solver on ``K̂ v = y − μ``; keeps the belief and the solver's info.

        Parameters
        ----------
        X
            Training inputs, shape ``(n, d)``.
        y
            Targets, shape ``(n,)``.
        generator
            Randomness for stochastic policies.

        Returns
        -------
        IterGP
            ``self``; ``self.belief`` and ``self.info`` hold the solve.
        """
        X = check_inputs(X, "X")
        y = check_targets(y, X)
        A = self.system(X)
        with torch.no_grad():
            self.belief, self.info = self.solver.solve(A, y - self.mean, generator=generator)
        self.X, self.y, self.A = X, y, A
        return self

    def iterate(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        Xs: torch.Tensor,
        generator: torch.Generator | None = None,
    ) -> Iterator[tuple[SolverState, GaussianPosterior]]:
        """Yield ``(state, posterior at Xs)`` after each solver iteration (0 = prior).

        For trade-off studies: the posterior's variance shrinks and its mean converges
        to the exact GP's as the iterations proceed. Afterwards the model is fitted
        with the last belief.
        """
        X = check_inputs(X, "X")
        y = check_targets(y, X)
        Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        A = self.system(X)
        self.X, self.y, self.A = X, y, A
        norms: list[torch.Tensor] = []
        for state in self.solver.iterate(A, y - self.mean, generator=generator):
            if state.iteration == len(norms):  # a breakdown repeats the last iteration
                norms.append(state.residual_norm)
            self.belief = state.belief
            yield state, self._posterior(Xs, state.belief)
        self.info = SolveInfo.from_history(state, norms)

    # ---------------------------------------------------------------- prediction
    def posterior(
        self,
        Xs: torch.Tensor,
        method: str = "belief",
        rank: int = 50,
        probe: torch.Tensor | None = None,
        cache: LoveCache | None = None,
    ) -> GaussianPosterior:
        """Posterior at test inputs ``Xs`` of shape ``(t, d)``.

        A pure query: the model is not modified (a LOVE cache built for this call is
        returned as ``posterior.love_cache``, not kept on the model). Both methods go
        through :func:`~pnsolve.gp.belief_posterior.belief_posterior`: ``"belief"``
        with the solver's ``C_i``, ``"love"`` with the cache's ``C_k = R Rᵀ``.

        Parameters
        ----------
        Xs
            Test inputs, shape ``(t, d)``.
        method
            ``"belief"`` (default: covariance from the solver's belief ``C_i``) or
            ``"love"`` (mean from the belief, variances from a
            :class:`~pnsolve.gp.LoveCache` of ``K̂ = self.A``; ``sample`` then uses a
            second Lanczos on the test covariance). The LOVE variance replaces the
            belief's: its ``comp_var`` is LOVE's own computational uncertainty (rank
            ``k`` Lanczos on the exact ``K̂``), not the fit's; for the fit's combined
            uncertainty use ``method="belief"``.
        rank
            Lanczos steps for ``method="love"`` when no ``cache`` is given (capped at
            ``n``, where the cache is exact).
        probe
            Lanczos probe for a new cache, shape ``(n,)``; default: ``k(X, Xs)``
            averaged over the test points.
        cache
            A cache from :meth:`build_love_cache` (or an earlier posterior's
            ``love_cache``), reused across calls (``rank`` and ``probe`` are then not
            used). Without it each ``"love"`` call builds a cache for that call only
            (``rank + 1`` matrix-free products with ``K̂``), returned as
            ``posterior.love_cache``.

        Returns
        -------
        GaussianPosterior
            ``mean``, ``var`` (combined), ``math_var`` and ``comp_var`` (on demand:
            ``t`` exact solves with ``K̂``), ``cov()``, ``sample(...)``.
        """
        X = self._require_fit()
        if method not in ("belief", "love"):
            raise ValueError(f"method must be 'belief' or 'love', got {method!r}")
        Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        if method == "love":
            check_rank(rank)
            return love_posterior(
                cache=self._love_cache(rank, probe, Xs, cache),
                kernel=self.kernel,
                X=X,
                Xs=Xs,
                weights=self.belief.mean,
                offset=self.mean,
                backend=self.backend,
            )
        return self._posterior(Xs, self.belief)

    def build_love_cache(
        self, rank: int = 50, probe: torch.Tensor | None = None, Xs: torch.Tensor | None = None
    ) -> LoveCache:
        """A LOVE cache of ``K̂ = self.A`` to reuse across ``posterior(..., cache=...)`` calls.

        Parameters
        ----------
        rank
            Lanczos steps (``rank + 1`` matrix-free products with ``K̂``; capped at ``n``).
        probe
            Starting vector, shape ``(n,)``. Default: ``k(X, Xs)`` averaged over ``Xs``
            when ``Xs`` is given, else the centred targets ``y − μ`` (the Krylov space
            of CG on the training system).
        Xs
            Representative test inputs, shape ``(t, d)``, for the default probe.

        Returns
        -------
        LoveCache
            The cache; the model is not modified (keep the cache yourself).
        """
        X = self._require_fit()
        check_rank(rank)
        if Xs is not None:
            Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        return self._love_cache(rank, probe, Xs, None)

    def _love_cache(
        self,
        rank: int,
        probe: torch.Tensor | None,
        Xs: torch.Tensor | None,
        cache: LoveCache | None,
    ) -> LoveCache:
        return resolve_love_cache(
            self.A,
            self.kernel,
            self._require_fit(),
            rank=rank,
            probe=probe,
            Xs=Xs,
            backend=self.backend,
            residual=self.y - self.mean,
            cache=cache,
        )

    def _require_fit(self) -> torch.Tensor:
        """The training inputs ``X`` ``(n, d)``; raises if :meth:`fit` was not called."""
        if self.X is None:
            raise RuntimeError("call fit(X, y) before asking for a posterior")
        return self.X

    def _posterior(self, Xs: torch.Tensor, belief: GaussianSolutionBelief) -> GaussianPosterior:
        return belief_posterior(
            cross=KernelMatrix(self.kernel, Xs, self.X, backend=self.backend),
            prior_var=self.kernel.diag(Xs),
            prior_cov=lambda: self.kernel(Xs),
            weights=belief.mean,
            V=belief.V,
            offset=self.mean,
            A=self.A,
        )
