"""IterGP: GP regression whose posterior includes the uncertainty left by a finite solve."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from .._core.precision import full_float32
from ..beliefs.gaussian_solution import GaussianSolutionBelief
from ..kernels.kernel import Kernel
from ..linops.base import LinearOperator
from ..linops.scaled_identity import ScaledIdentity
from ..policies.base import Policy
from ..solvers.solver import ProbabilisticLinearSolver
from ..solvers.state import SolveInfo, SolverState
from ..stopping.base import StoppingCriterion
from ._checks import (
    check_backend,
    check_choice,
    check_inputs,
    check_mean,
    check_model_kernel,
    check_noise,
    check_positive_number,
    check_targets,
)
from ._fitted import FitRecord, readout
from ._regression import RegressionGP
from .belief_posterior import belief_posterior
from .fit_state import own_copy
from .love import LoveCache
from .posterior import GaussianPosterior

__all__ = ["IterGP", "IterGPFitState"]


@dataclass(frozen=True)
class IterGPFitState(FitRecord):
    """What :meth:`IterGP.fit` computed, and from what (never modified).

    The fields of every model's ``FitRecord`` (``provenance``, ``X``, ``y``, ``A``: here
    ``K̂`` as a matrix-free operator unless ``backend="dense"``) and:

    Attributes
    ----------
    belief
        The solver's belief about ``K̂⁻¹ (y − μ)``.
    info
        The solve's :class:`~pnsolve.SolveInfo` (``None`` while :meth:`IterGP.iterate`
        runs).
    generator
        The generator given to the fit (a refit after a change draws from it again).
    """

    belief: GaussianSolutionBelief
    info: SolveInfo | None
    generator: torch.Generator | None


class IterGP(RegressionGP[IterGPFitState]):
    """Computation-aware GP regression (Wenger et al. 2022).

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

    **Calibration.** The computational variance is an error bar only when the
    policy's actions do not depend on ``y``: then the fit is exact Gaussian inference
    and on data drawn from the GP prior ``(mean − exact mean) / √comp_var`` is
    standard normal. ``posterior.calibrated`` says which case holds. **CG's
    computational variance is not an error bar**: CG's actions are residuals, so its
    belief is over-confident in the first iterations and far too wide later (measured
    on 400 concrete inputs, Matérn-3/2 with the median-distance lengthscale, σ² = 0.1:
    ``E[z²] = 2.9`` and 75 % coverage of the 95 % interval after 5 iterations, ``0.002``
    after 20, ``2e-15`` after 50; ``docs/calibration.md``). Calibrated options (about
    1.1 × CG's time, the same products): ``pn.policies.Lanczos(start="random")`` (the
    recommended default: a Krylov space of ``K̂`` from a random vector),
    ``pn.policies.PivotedCholeskyActions()`` (equally accurate, reads a row of ``K̂`` per
    iteration), ``UnitVector("random")``, ``pn.policies.Random()``,
    ``UnitVector("schur")``, ``pn.policies.PseudoInput``; and
    :class:`~pnsolve.gp.AffineGP` (Gauss–Seidel and relatives: the most accurate
    calibrated mean at small budgets). CG is far more accurate once it converges
    superlinearly. For CG, ``posterior(Xs, comp_var_scale="residual")`` rescales the
    computational variance by a heuristic factor (see :meth:`residual_scale`).

    Parameters
    ----------
    kernel
        A :class:`~pnsolve.kernels.Kernel`: stationary (matrix-free products through
        ``backend``) or SKI (:class:`~pnsolve.kernels.GridInterpolation`: products
        ``W K_UU Wᵀ`` through sparse interpolation and FFTs; ``fit`` fixes a grid without
        ``grid_bounds`` to cover ``X``, see :meth:`Kernel.bind
        <pnsolve.kernels.Kernel.bind>`).
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
        ``"chunked"`` (matrix-free), ``"keops"`` or ``"distributed"`` (inside an
        initialised torch.distributed group: every product's rows over the ranks, each
        rank fitting and predicting the same model).
    precision
        ``"full"`` (default) or ``"mixed"``: the solver's products with ``K̂`` in float32
        (float32 kernel tiles on the matrix-free backends, a float32 copy of a dense
        ``K̂``) while the belief, the representer weights and every prediction stay in
        float64 (``X`` and ``y`` float64); see
        :class:`~pnsolve.ProbabilisticLinearSolver`.

    Notes
    -----
    A query after the kernel's hyperparameters, ``noise`` or ``mean`` changed since
    :meth:`fit` (an optimiser step, ``k.lengthscale = …``, ``load_state_dict``) runs
    the solver again on the same data first (with the generator given to ``fit``, whose
    stream goes on): answers always follow the current hyperparameters. Training data
    written in place since the fit are refused
    (:class:`~pnsolve.gp.fit_state.FitChangedError`).
    """

    def __init__(
        self,
        kernel: Kernel,
        noise: float,
        policy: Policy,
        stopping: StoppingCriterion,
        mean: float = 0.0,
        *,
        backend: str = "auto",
        precision: str = "full",
    ) -> None:
        self.kernel = check_model_kernel(kernel)
        self.noise = check_noise(noise)
        self.solver = ProbabilisticLinearSolver(policy, stopping, precision=precision)
        self.mean = float(check_mean(mean))
        self.backend = check_backend(backend)

    # ------------------------------------------------------------------ fitting
    def system(self, X: torch.Tensor) -> LinearOperator:
        """``K̂ = K(X, X) + σ² I`` as a (matrix-free unless ``backend="dense"``) operator."""
        K = self.kernel.linop(X, backend=self.backend)
        return K + ScaledIdentity(X.shape[0], self.noise, dtype=X.dtype, device=X.device)

    @full_float32
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
        X, y = own_copy(X), own_copy(y)  # the fit's own data: later writes do not reach it
        self._bind_kernel(X)
        provenance = self._provenance(X, y)
        A = self.system(X)
        with torch.no_grad():
            belief, info = self.solver.solve(A, y - self.mean, generator=generator)
        self._store(IterGPFitState(provenance, X, y, A, belief, info, generator))
        return self

    def _refit(self, record: IterGPFitState) -> None:
        self.fit(record.X, record.y, generator=record.generator)

    belief: GaussianSolutionBelief = readout("belief")
    """The solver's belief of the current fit."""

    info: SolveInfo | None = readout("info")
    """The solve's :class:`~pnsolve.SolveInfo` of the current fit."""

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
        X, y = own_copy(X), own_copy(y)  # the fit's own data: later writes do not reach it
        Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        self._bind_kernel(X)
        self._check_test_inputs(Xs, X)
        provenance = self._provenance(X, y)
        A = self.system(X)
        # the test inputs' operators do not change with the iterations: built once
        cross = self.kernel.linop(Xs, X, backend=self.backend)
        prior_var = self.kernel.diag(Xs)
        norms: list[torch.Tensor] = []
        for state in self.solver.iterate(A, y - self.mean, generator=generator):
            if state.iteration == len(norms):  # a breakdown repeats the last iteration
                norms.append(state.residual_norm)
            record = IterGPFitState(provenance, X, y, A, state.belief, None, generator)
            self._store(record)
            post = self._posterior(record, Xs, state.belief, cross=cross, prior_var=prior_var)
            yield state, post
        info = SolveInfo.from_history(state, norms)
        self._store(IterGPFitState(provenance, X, y, A, state.belief, info, generator))

    # ---------------------------------------------------------------- prediction
    @full_float32
    def posterior(
        self,
        Xs: torch.Tensor,
        method: str = "belief",
        rank: int = 50,
        probe: torch.Tensor | None = None,
        cache: LoveCache | None = None,
        *,
        comp_var_scale: float | str | None = None,
    ) -> GaussianPosterior:
        """Posterior at test inputs ``Xs`` of shape ``(t, d)``.

        A query: the model is not modified (a LOVE cache built for this call is
        returned as ``posterior.love_cache``, not kept on the model), except that a
        model whose hyperparameters changed since :meth:`fit` fits again first. Both methods
        project onto a belief (:func:`~pnsolve.gp.belief_posterior.project_belief`):
        ``"belief"`` the solver's ``C_i``, ``"love"`` the cache's ``C_k = R Rᵀ``.

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
        rank, probe, cache
            The LOVE cache for ``method="love"``, as in
            :meth:`~pnsolve.gp.ExactGP.posterior` (here the products with ``K̂`` are
            matrix-free).
        comp_var_scale
            ``None`` (default): the belief's covariance. ``"residual"``: multiply the
            computational part by :meth:`residual_scale` (a **heuristic** for
            uncalibrated policies such as CG). A positive number: multiply it by that
            number. Then ``var = math_var + s · comp_var`` needs the exact split
            eagerly (``t`` CG solves with ``K̂``: an analysis path), and the posterior is
            never marked ``calibrated``. Only with ``method="belief"``.

        Returns
        -------
        GaussianPosterior
            ``mean``, ``var`` (combined), ``math_var`` and ``comp_var`` (on demand:
            ``t`` exact solves with ``K̂``), ``cov()``, ``sample(...)``, ``calibrated``
            (the belief's: ``True`` iff the policy is non-adaptive; with ``"love"``
            also the cache's) and ``comp_var_scale``; for ``"love"`` a
            :class:`~pnsolve.gp.LovePosterior` (``love_cache``, ``sample_root()``).
        """
        record, Xs = self._query(Xs, method, "belief")
        if method == "love":
            if comp_var_scale is not None:
                raise ValueError("comp_var_scale applies to method='belief' only")
            return self._love_posterior(
                record, Xs, rank, probe, cache, fit_calibrated=record.belief.calibrated
            )
        scale = self._scale(record, comp_var_scale)
        return self._posterior(record, Xs, record.belief, scale)

    def residual_scale(self) -> float:
        """The residual rescaling heuristic ``s = ‖r_i‖² / (tr K̂ − ‖K̂ V‖²_F)``.

        A calibrated belief predicts ``E‖r_i‖² = tr(K̂ Σ_i K̂) = tr K̂ − ‖W‖²_F`` over data
        drawn from the GP prior (``W = K̂ V``; ``belief.expected_squared_residual()``);
        ``s`` is the observed over the predicted value. It is ``≈ 1`` for a calibrated
        belief; for CG it is ``> 1`` in the first iterations (the belief is
        over-confident) and ``≪ 1`` later (too wide). One residual is one draw, so
        ``s`` is a noisy, single-sample moment match: a heuristic, not exact inference.
        Costs nothing beyond the fit (``K̂``'s structured diagonal). Returns ``1.0``
        when the belief has no uncertainty left (``tr K̂ − ‖W‖²_F ≤ n eps tr K̂``).
        """
        return self._residual_scale(self._fitted())

    def _residual_scale(self, record: IterGPFitState) -> float:
        belief, A = record.belief, record.A
        if record.info is None:
            raise RuntimeError("residual_scale needs a finished fit (iterate() still runs)")
        with torch.no_grad():
            r2 = float(record.info.residual_norms[-1]) ** 2
            trace = float(A.trace())
            predicted = float(belief.expected_squared_residual())
        if not predicted > A.shape[0] * torch.finfo(belief.mean.dtype).eps * trace:
            return 1.0
        return r2 / predicted

    def _scale(self, record: IterGPFitState, comp_var_scale: float | str | None) -> float:
        """The factor for ``comp_var_scale`` (``1.0`` for ``None``)."""
        if comp_var_scale is None:
            return 1.0
        if isinstance(comp_var_scale, str):
            check_choice(comp_var_scale, "comp_var_scale", ("residual",))
            return self._residual_scale(record)
        return check_positive_number(comp_var_scale, "comp_var_scale")

    def _backend(self) -> str:
        return self.backend

    def _weights(self, record: IterGPFitState) -> torch.Tensor:
        return record.belief.mean

    def _posterior(
        self,
        record: IterGPFitState,
        Xs: torch.Tensor,
        belief: GaussianSolutionBelief,
        scale: float = 1.0,
        *,
        cross: LinearOperator | None = None,
        prior_var: torch.Tensor | None = None,
    ) -> GaussianPosterior:
        """The belief posterior at ``Xs`` (``cross`` and ``prior_var`` built if not given)."""
        post = belief_posterior(
            cross=self.kernel.linop(Xs, record.X, backend=self.backend) if cross is None else cross,
            prior_var=self.kernel.diag(Xs) if prior_var is None else prior_var,
            prior_cov=lambda: self.kernel(Xs),
            weights=belief.mean,
            V=belief.V,
            offset=self.mean,
            A=record.A,
            calibrated=belief.calibrated,
            comp_var_scale=scale,
        )
        return self._tie(post, record)
