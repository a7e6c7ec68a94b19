"""IterNCGP: Laplace inference for non-conjugate GPs as sequential computation-aware regression.

Tatzel, Wenger, Schneider & Hennig (2024): Newton step ``t`` on the log posterior is
GP regression with pseudo-targets ``ŷ_t = f_t − μ + W_t⁻¹ g_t`` and noise ``W_t⁻¹``,
solved by the probabilistic linear solver (IterGP, the inner loop) with a Krylov buffer
recycling actions across steps. The model holds configuration and the last
:class:`~pnsolve.gp.laplace.LaplaceState` of :func:`~pnsolve.gp.laplace.newton_loop`;
the loop, its step-size search and the predictions live in :mod:`pnsolve.gp.laplace`.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch

from .._core.precision import full_float32
from ..kernels.kernel import Kernel
from ..likelihoods.base import Likelihood
from ..linops.base import LinearOperator
from ..policies.base import Policy
from ..solvers.solver import ProbabilisticLinearSolver
from ..solvers.state import SolverState
from ..stopping.base import StoppingCriterion
from ._checks import (
    check_backend,
    check_bool,
    check_inputs,
    check_matrix_free_kernel,
    check_mean,
)
from .fit_state import Provenance, own_copy
from .laplace.fitted import FitInputs, LaplaceFit
from .laplace.line_search import MAX_HALVINGS
from .laplace.newton import check_newton_config, newton_loop
from .laplace.prediction import latent_posterior, predict_from_posterior
from .laplace.problem import LaplaceProblem, laplace_problem, latent_kernel
from .laplace.state import LaplaceState, NewtonStep, NewtonStopReason
from .posterior import GaussianPosterior

__all__ = ["MAX_HALVINGS", "IterNCGP", "LaplaceState", "NewtonStep", "NewtonStopReason"]


class IterNCGP(LaplaceFit):
    """Computation-aware Laplace approximation for non-conjugate likelihoods.

    Parameters
    ----------
    kernel
        Prior covariance of each latent function (shared by the ``C`` latent functions
        of a softmax likelihood, which are independent a priori).
    likelihood
        A :class:`~pnsolve.likelihoods.Likelihood` (Gaussian, Bernoulli, Poisson, Softmax).
    policy
        Inner-loop action policy, e.g. ``pn.policies.CG()``.
    stopping
        Inner-loop stopping criterion per Newton step, e.g. ``MaxIterations(5)``
        (iterations are counted after the buffer replay).
    max_newton_steps
        Outer-loop budget. A Gaussian likelihood always takes one step (its Laplace
        approximation is exact and one Newton step reaches the mode), so the model
        then equals :class:`~pnsolve.gp.IterGP`.
    newton_tol
        Stop when the RMS size of the full (undamped) inexact Newton step
        ``‖Δf‖ / √N`` falls below it.
    recycle
        Keep a :class:`~pnsolve.krylov.KrylovBuffer` of ``K`` across Newton steps.
    max_rank
        Compress the buffer to this many directions after each Newton step (``None``:
        keep everything, memory ``O(N · total iterations)``).
    mean
        Constant prior mean ``μ`` of every latent function.
    backend
        Kernel-matrix backend (``"auto"``, ``"dense"``, ``"chunked"``, ``"keops"``,
        ``"distributed"``: products split over a torch.distributed group's ranks).

    Attributes
    ----------
    state
        The last :class:`~pnsolve.gp.laplace.LaplaceState` (``None`` before a fit); the
        properties below read it.
    steps
        One :class:`~pnsolve.gp.laplace.NewtonStep` per outer step of the last fit (a tuple).
    buffer
        The Krylov buffer (``None`` without recycling).
    f
        Latent mode at the training inputs, shape ``(n,)`` or ``(n, C)``.
    weights
        ``a = K⁻¹ (f − μ)`` at the mode, shape ``(C n,)``: the posterior mean is
        ``μ + k(x, X) a``.
    A, belief
        The last Newton system operator and the inner solver's belief about it.
    converged, stop_reason
        Whether the Newton loop met ``newton_tol``; a
        :class:`~pnsolve.gp.laplace.NewtonStopReason` (a ``str`` enum equal to
        ``"converged"``, ``"max_newton_steps"`` or ``"no_ascent"``; ``None`` while the
        loop runs).

    Notes
    -----
    Each Newton direction comes from an inexact inner solve; the step is halved until
    the Laplace objective ``Ψ(f) = Σ log p(y|f) − ½ (f − μ)ᵀ K⁻¹ (f − μ)`` does not
    decrease (evaluated without products with ``K``). When no step ascends, with
    recycling the next outer step re-solves the *same* Newton system (buffer replay plus
    ``stopping``'s budget of new actions); without recycling the loop stops with
    ``"no_ascent"`` (see :func:`~pnsolve.gp.laplace.newton_loop`). For the softmax the
    regression runs on ``P K P + W⁺`` with ``P`` the per-point projector off the
    all-ones direction, the only directions the likelihood informs, so the posterior
    covariance is the Laplace covariance ``(K⁻¹ + W)⁻¹`` (the unprojected ``K + W⁺``
    would treat the per-point class sum as observed without noise); the solver runs on
    ``P K P + W⁺ + c (I − P)`` (``c`` = the prior variance), identical on range ``P``,
    so that rounding errors leaving range ``P`` are measured by the solver's metric
    instead of growing unseen.

    A query after the kernel's hyperparameters, the likelihood's parameters or
    ``mean`` changed since :meth:`fit` (an optimiser step, ``k.lengthscale = …``,
    ``load_state_dict``) runs the Newton loop again on the same data (and the same
    ``K`` and generator, if given) first: answers always follow the current
    hyperparameters. Training data written in place since the fit are refused
    (:class:`~pnsolve.gp.fit_state.FitChangedError`).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.linspace(0, 1, 30, dtype=torch.float64).unsqueeze(-1)
    >>> y = (X[:, 0] > 0.5).double()
    >>> m = pn.gp.IterNCGP(pn.kernels.RBF(lengthscale=0.3), pn.likelihoods.Bernoulli(),
    ...                    pn.policies.CG(), pn.stopping.MaxIterations(10)).fit(X, y)
    >>> m.predict_proba(X[:2]).shape
    torch.Size([2])
    >>> m.stop_reason == "converged"
    True
    """

    def __init__(
        self,
        kernel: Kernel,
        likelihood: Likelihood,
        policy: Policy,
        stopping: StoppingCriterion,
        max_newton_steps: int = 20,
        newton_tol: float = 1e-6,
        recycle: bool = True,
        max_rank: int | None = None,
        mean: float = 0.0,
        *,
        backend: str = "auto",
    ) -> None:
        self.kernel = check_matrix_free_kernel(kernel, "IterNCGP")
        if not isinstance(likelihood, Likelihood):
            raise TypeError(
                f"likelihood must be a pnsolve.likelihoods.Likelihood, got "
                f"{type(likelihood).__name__}"
            )
        check_newton_config(max_newton_steps, newton_tol, max_rank)
        self.likelihood = likelihood
        self.solver = ProbabilisticLinearSolver(policy, stopping)
        self.max_newton_steps = max_newton_steps
        self.newton_tol = float(newton_tol)
        self.recycle = check_bool(recycle, "recycle")
        self.max_rank = max_rank
        self.mean = float(check_mean(mean))
        self.backend = check_backend(backend)
        self._state: LaplaceState | None = None
        self._f_cache: tuple[LaplaceState, torch.Tensor] | None = None
        self._fit_inputs: FitInputs | None = None

    # ------------------------------------------------------------------ operators
    @property
    def num_latent(self) -> int:
        """Number of latent functions ``C`` (1 except for the softmax)."""
        return self.likelihood.num_latent

    def prior_operator(self, X: torch.Tensor) -> LinearOperator:
        """``K`` on the class-major latent vector: ``I_C ⊗ k(X, X)``, shape ``(C n, C n)``."""
        return latent_kernel(self.kernel, X, None, self.num_latent, self.backend)

    # ------------------------------------------------------------------ fitting
    @full_float32
    def fit(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        generator: torch.Generator | None = None,
        K: LinearOperator | None = None,
    ) -> IterNCGP:
        """Run the Newton outer loop with IterGP inner solves.

        Parameters
        ----------
        X
            Training inputs, shape ``(n, d)``.
        y
            Targets, shape ``(n,)`` (labels, counts or values; checked by the likelihood).
        generator
            Randomness for stochastic policies.
        K
            Optional prior operator to use instead of :meth:`prior_operator` (same
            shape, e.g. wrapped in a :class:`~pnsolve.testing.CountingOperator` to count
            kernel products).

        Returns
        -------
        IterNCGP
            ``self``.
        """
        for _ in self.iterate(X, y, generator=generator, K=K):
            pass
        return self

    def iterate(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        Xs: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        K: LinearOperator | None = None,
    ) -> Iterator[tuple[int, SolverState, GaussianPosterior | None]]:
        """Yield ``(newton_step, inner solver state, posterior at Xs or None)``.

        One item per inner iteration (including each step's replayed initial state),
        so trade-off studies can follow the latent posterior through both loops. The
        posterior is the current step's IterGP posterior (mean from the solver's
        current weights, combined variance from its belief); :attr:`state` is the
        loop's full :class:`~pnsolve.gp.laplace.LaplaceState`. After the loop the model
        is fitted. Arguments as in :meth:`fit`; ``Xs`` has shape ``(t, d)``.
        """
        problem = laplace_problem(  # on the fit's own copy: later writes do not reach it
            self.kernel, self.likelihood, own_copy(X), own_copy(y), K=K, mean=self.mean,
            backend=self.backend,
        )  # fmt: skip
        if Xs is not None:
            Xs = check_inputs(Xs, "Xs", problem.X.shape[1], like=problem.X)
        return self._run(problem, Xs, generator, K)

    def _sources(self) -> dict[str, object]:
        """The hyperparameter sources a fit depends on, by name."""
        return {"kernel": self.kernel, "likelihood": self.likelihood, "mean": self.mean}

    def _run(
        self,
        problem: LaplaceProblem,
        Xs: torch.Tensor | None,
        generator: torch.Generator | None,
        K: LinearOperator | None,
    ) -> Iterator[tuple[int, SolverState, GaussianPosterior | None]]:
        """Drive :func:`~pnsolve.gp.laplace.newton_loop`, keeping its last state."""
        self._state = None
        provenance = Provenance.record({"X": problem.X, "y": problem.y}, self._sources())
        self._fit_inputs = FitInputs(provenance, problem.X, problem.y, generator, K)
        loop = newton_loop(
            problem,
            self.solver,
            max_newton_steps=self.max_newton_steps,
            newton_tol=self.newton_tol,
            recycle=self.recycle,
            max_rank=self.max_rank,
            generator=generator,
        )
        with contextlib.closing(loop):
            for state in loop:
                self._state = state  # readable while iterating
                if state.record is not None:  # the end of a Newton step: no inner iteration
                    continue
                post = (
                    None
                    if Xs is None
                    else self._tie(
                        latent_posterior(state, self.kernel, Xs, backend=self.backend),
                        provenance,
                    )
                )
                yield state.newton_step, state.inner, post
        last = self._state
        if last is not None and last.stop_reason == NewtonStopReason.MAX_NEWTON_STEPS:
            warnings.warn(
                f"IterNCGP.fit: the Newton loop stopped at max_newton_steps="
                f"{self.max_newton_steps} without meeting newton_tol={self.newton_tol:g}: "
                "the mode is not converged; raise max_newton_steps (or give the inner "
                "solver more iterations)",
                UserWarning,
                stacklevel=3,
            )

    # ------------------------------------------------------------------ prediction
    @full_float32
    def posterior(self, Xs: torch.Tensor) -> GaussianPosterior:
        """Latent posterior at ``Xs`` of shape ``(t, d)`` (Laplace + computational uncertainty).

        A query: the model is not changed (unless stale: then it fits again first).

        Returns
        -------
        GaussianPosterior
            ``mean`` and ``var`` of shape ``(t,)`` (``(t, C)`` for a softmax
            likelihood); ``var`` is the combined variance ``k − k C_i k`` of the last
            Newton step's belief (``≥`` the exact Laplace variance at that mode);
            ``math_var``/``comp_var`` split it on demand with exact solves.
            ``calibrated`` is that belief's: ``True`` only for a non-adaptive inner
            policy (``policy.adaptive`` is ``False``) and no replayed buffer, i.e.
            ``recycle=False`` or a single Newton step (the recycled
            :class:`~pnsolve.krylov.KrylovBuffer` does not record its provenance).
        """
        state = self._fitted()
        X = state.problem.X
        Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        post = latent_posterior(state, self.kernel, Xs, weights=state.weights, backend=self.backend)
        assert self._fit_inputs is not None
        return self._tie(post, self._fit_inputs.provenance)

    @full_float32
    def predict_proba(
        self,
        Xs: torch.Tensor,
        method: str = "probit",
        num_samples: int = 1000,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Predictive class probabilities (or Poisson rates) at ``Xs``.

        The likelihood's :meth:`~pnsolve.likelihoods.Likelihood.predict` on the latent
        marginals of :meth:`posterior`. :meth:`predict` is the same method under the
        name that reads naturally for counts (expected Poisson rates ``E[exp f]``).

        Parameters
        ----------
        Xs
            Test inputs, shape ``(t, d)``.
        method
            ``"probit"`` (MacKay's approximation for logit/softmax, exact for the probit
            link; the closed-form rate ``exp(m + v/2)`` for Poisson) or ``"mc"``
            (Monte Carlo over the latent marginals, needs ``generator``).
        num_samples
            Monte Carlo draws.
        generator
            Randomness for ``method="mc"``.

        Returns
        -------
        torch.Tensor
            ``p(y = 1)`` of shape ``(t,)`` (Bernoulli), class probabilities ``(t, C)``
            (Softmax) or expected rates ``(t,)`` (Poisson).

        Raises
        ------
        ArithmeticError
            If a latent variance is negative beyond rounding (see
            :func:`~pnsolve.gp.laplace.predict_from_posterior`).
        """
        state = self._fitted()
        Xs = check_inputs(Xs, "Xs", state.problem.X.shape[1], like=state.problem.X)
        post = self.posterior(Xs)
        return predict_from_posterior(
            state.problem, self.kernel, Xs, post, method, num_samples, generator
        )

    predict = predict_proba
    """The same method as :meth:`predict_proba`, named for counts (expected Poisson rates)."""
