"""IterNCGP: Laplace inference for non-conjugate GPs as sequential computation-aware regression.

Tatzel, Wenger, Schneider & Hennig (2024): Newton step ``t`` on the log posterior is
GP regression with pseudo-targets ``ŷ_t = f_t − μ + W_t⁻¹ g_t`` observed with noise
``W_t⁻¹`` (``g = ∇ log p(y|f)``, ``W = −∇² log p(y|f)``; ``W⁺`` for the softmax). Each
regression is solved by the probabilistic linear solver on ``A_t = K + W_t⁻¹`` (IterGP,
the inner loop); the new latent mode is ``f_{t+1} = μ + K v_t``, which needs no
product with ``K`` because ``A_t v_t = ŷ_t − r_t`` is known from the solver. A
:class:`~pnsolve.krylov.KrylovBuffer` of ``K`` recycles every action across Newton
steps (a product-free *virtual run* at the start of each solve), optionally compressed
to ``max_rank`` directions after each step.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ..kernels.base import StationaryKernel
from ..kernels.kernel_matrix import KernelMatrix
from ..krylov.buffer import KrylovBuffer
from ..likelihoods.base import Likelihood
from ..likelihoods.gaussian import Gaussian
from ..linops.base import LinearOperator
from ..linops.closure import Closure
from ..linops.repeated_block import RepeatedBlockDiagonal
from ..linops.sum import Sum
from ..policies.base import Policy
from ..policies.projected import Projected
from ..solvers.solver import ProbabilisticLinearSolver
from ..solvers.state import SolverState
from ..stopping.base import StoppingCriterion
from ._checks import as_tensor, check_inputs
from .belief_posterior import belief_posterior
from .posterior import GaussianPosterior

__all__ = ["IterNCGP", "NewtonStep"]

#: Step halvings tried before declaring that the inexact Newton direction is no ascent.
MAX_HALVINGS = 30


@dataclass(frozen=True)
class NewtonStep:
    """Record of one outer (Newton) step of :class:`IterNCGP`.

    Attributes
    ----------
    step
        Newton step ``t`` (0-based).
    iterations
        Inner solver iterations in this step (new actions, not counting the replay).
    products
        Products with ``K`` (kernel matrix) in this step: one per inner iteration.
    buffer_size
        Buffered actions after the step (after compression).
    change
        RMS change of the latent mode ``‖f_{t+1} − f_t‖ / √N``.
    log_likelihood
        ``Σ log p(y | f_{t+1})`` at the new mode.
    step_size
        Fraction of the (inexact) Newton step taken (``1`` unless step halving on the
        Laplace objective shortened it; ``0``: no ascent found, the mode is unchanged
        and, with recycling, the next step refines the same Newton system).
    objective
        The Laplace objective ``Ψ = Σ log p(y | f) − ½ (f − μ)ᵀ K⁻¹ (f − μ)`` after the step.
    """

    step: int
    iterations: int
    products: int
    buffer_size: int
    change: float
    log_likelihood: float
    step_size: float
    objective: float


class IterNCGP:
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
        Kernel-matrix backend (``"auto"``, ``"dense"``, ``"chunked"``, ``"keops"``).

    Attributes
    ----------
    steps
        One :class:`NewtonStep` per outer step of the last fit.
    buffer
        The Krylov buffer (``None`` without recycling).
    f
        Latent mode at the training inputs, shape ``(n,)`` or ``(n, C)``.
    weights
        ``a = K⁻¹ (f − μ)`` at the mode, shape ``(C n,)``: the posterior mean is
        ``μ + k(x, X) a``.
    converged, stop_reason
        Whether the Newton loop met ``newton_tol``; ``"converged"``,
        ``"max_newton_steps"`` or ``"no_ascent"`` (step halving on the Laplace objective
        found no increase along the inexact Newton direction and the inner solve could
        not be refined: without recycling, or when it added no new direction; give the
        inner solver more iterations).

    Notes
    -----
    Each Newton direction comes from an inexact inner solve; the step is halved until
    the Laplace objective ``Ψ(f) = Σ log p(y|f) − ½ (f − μ)ᵀ K⁻¹ (f − μ)`` does not
    decrease (evaluated without products with ``K``). When no step ascends, the
    direction was too inexact: with recycling the next outer step (it counts towards
    ``max_newton_steps``) solves the *same* Newton system again, replaying the buffer
    (no product with ``K``) and adding ``stopping``'s budget of new actions, so small
    inner budgets keep making progress; without recycling a re-solve would repeat the
    same direction and the loop stops with ``"no_ascent"``. For the softmax the regression
    runs on ``P K P + W⁺`` with ``P`` the per-point projector off the all-ones
    direction, the only directions the likelihood informs; the posterior covariance is
    then the Laplace covariance ``(K⁻¹ + W)⁻¹`` (the unprojected ``K + W⁺`` would
    treat the per-point class sum as observed without noise). That operator is singular
    off range ``P``; the solver runs on ``P K P + W⁺ + c (I − P)`` (``c`` = the prior
    variance), identical on range ``P``, so that rounding errors leaving range ``P`` are
    measured by the solver's metric instead of growing unseen.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.linspace(0, 1, 30, dtype=torch.float64).unsqueeze(-1)
    >>> y = (X[:, 0] > 0.5).double()
    >>> m = pn.gp.IterNCGP(pn.kernels.RBF(lengthscale=0.3), pn.likelihoods.Bernoulli(),
    ...                    pn.policies.CG(), pn.stopping.MaxIterations(10)).fit(X, y)
    >>> m.predict_proba(X[:2]).shape
    torch.Size([2])
    """

    def __init__(
        self,
        kernel: StationaryKernel,
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
        if not isinstance(kernel, StationaryKernel):
            raise TypeError(f"kernel must be a pnsolve kernel, got {type(kernel).__name__}")
        if not isinstance(likelihood, Likelihood):
            raise TypeError(
                f"likelihood must be a pnsolve.likelihoods.Likelihood, got "
                f"{type(likelihood).__name__}"
            )
        if (
            isinstance(max_newton_steps, bool)
            or not isinstance(max_newton_steps, int)
            or max_newton_steps < 1
        ):
            raise ValueError(f"max_newton_steps must be a positive int, got {max_newton_steps!r}")
        if not (isinstance(newton_tol, int | float) and newton_tol >= 0):
            raise ValueError(f"newton_tol must be a non-negative number, got {newton_tol!r}")
        if max_rank is not None and (
            isinstance(max_rank, bool) or not isinstance(max_rank, int) or max_rank < 1
        ):
            raise ValueError(f"max_rank must be None or a positive int, got {max_rank!r}")
        self.kernel = kernel
        self.likelihood = likelihood
        self.solver = ProbabilisticLinearSolver(policy, stopping)
        self.max_newton_steps = max_newton_steps
        self.newton_tol = float(newton_tol)
        self.recycle = bool(recycle)
        self.max_rank = max_rank
        self.mean = float(mean)
        self.backend = backend
        self.X: torch.Tensor | None = None
        self._P: LinearOperator | None = None
        self._f_cache: torch.Tensor | None = None

    # ------------------------------------------------------------------ operators
    @property
    def num_latent(self) -> int:
        """Number of latent functions ``C`` (1 except for the softmax)."""
        return self.likelihood.num_latent

    def prior_operator(self, X: torch.Tensor) -> LinearOperator:
        """``K`` on the class-major latent vector: ``I_C ⊗ k(X, X)``, shape ``(C n, C n)``."""
        K = KernelMatrix(self.kernel, X, backend=self.backend)
        return K if self.num_latent == 1 else RepeatedBlockDiagonal(K, self.num_latent)

    def _cross(self, Xs: torch.Tensor) -> LinearOperator:
        K = KernelMatrix(self.kernel, Xs, self.X, backend=self.backend)
        return K if self.num_latent == 1 else RepeatedBlockDiagonal(K, self.num_latent)

    # ------------------------------------------------------------------ fitting
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
        current weights, combined variance from its belief). After the loop the model
        is fitted.
        """
        X = check_inputs(X, "X")
        y = self.likelihood.check_targets(as_tensor(y, "y", int_dtype=None, device=X.device))
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} targets but X has {X.shape[0]} rows")
        if Xs is not None:
            Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        Kop = self.prior_operator(X) if K is None else _check_prior(K, X, self.num_latent)
        return self._loop(X, y, Xs, Kop, generator)

    def _loop(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        Xs: torch.Tensor | None,
        Kop: LinearOperator,
        generator: torch.Generator | None,
    ) -> Iterator[tuple[int, SolverState, GaussianPosterior | None]]:
        lik = self.likelihood
        N = Kop.shape[0]
        P = lik.latent_projector(X.shape[0], X.dtype, X.device)
        Keff = Kop if P is None else _sandwich(P, Kop)  # P K P: the informed directions
        # P K P + W⁺ is singular off range P; c (I − P) makes it positive definite there
        # without changing anything on range P (targets and actions live there), so the
        # solver's A-metric sees, and keeps in check, rounding that leaves range P.
        complement = (
            None if P is None else _complement(P, float(self.kernel.diag(X[:1]).detach()[0]))
        )
        self.X, self.y, self.K, self._P = X, y, Kop, P
        self.buffer = KrylovBuffer(Keff) if self.recycle else None
        solver = self.solver
        if P is not None:  # keep the actions (and so the belief) in range P, see Projected
            solver = ProbabilisticLinearSolver(Projected(solver.policy, P), solver.stopping)
        self.steps: list[NewtonStep] = []
        self.converged, self.stop_reason = False, "max_newton_steps"
        gaussian = isinstance(lik, Gaussian)
        h = torch.zeros(N, dtype=X.dtype, device=X.device)  # P (f − μ)
        a = torch.zeros_like(h)  # K⁻¹ (f − μ), in range P
        psi = self._objective(h, a, y)
        self._h, self.weights, self._f_cache = h, a, None  # readable while iterating
        with torch.no_grad():
            for t in range(1 if gaussian else self.max_newton_steps):
                F = lik.unflatten(self.mean + h)
                noise = lik.noise(F, y)
                target = h + noise @ lik.flatten(lik.gradient(F, y))  # pseudo-targets − μ
                A = Sum(Keff, noise) if complement is None else Sum(Keff, noise, complement)
                state = None
                size_before = 0 if self.buffer is None else self.buffer.size
                inner = solver.iterate(A, target, buffer=self.buffer, generator=generator)
                for state in inner:
                    self.A, self.belief = A, state.belief
                    post = None if Xs is None else self._posterior(Xs, state.belief)
                    yield t, state, post
                v = state.belief.mean
                h_new = target - state.residual - noise @ v  # K v = A v − W⁻¹ v: no K product
                a_new = v if P is None else P @ v
                step, h_try, a_try, psi_try = self._step_size(h, a, psi, h_new, a_new, y, gaussian)
                grew = self.buffer is not None and self.buffer.size > size_before
                if self.buffer is not None and self.max_rank is not None:
                    self.buffer.compress(self.max_rank, A)
                if step == 0.0:  # no ascent along the inexact Newton direction
                    self._record(t, state, 0.0, 0.0, psi, float(a @ h))
                    if grew:  # refine: the next step re-solves this system, replay + new actions
                        continue
                    self.stop_reason = "no_ascent"
                    break
                change = float(torch.linalg.vector_norm(h_try - h)) / math.sqrt(N)
                # Converged when the full (undamped) Newton step is small: a heavily
                # damped step is small because the direction is poor, not because f is
                # near the mode.
                full = float(torch.linalg.vector_norm(h_new - h)) / math.sqrt(N)
                h, a, psi = h_try, a_try, psi_try
                self._h, self.weights = h, a
                self._record(t, state, step, change, psi, float(a @ h))
                if gaussian or full <= self.newton_tol:
                    self.converged, self.stop_reason = True, "converged"
                    break
        self._h, self.weights = h, a
        self._f_cache = None

    def _objective(self, h: torch.Tensor, a: torch.Tensor, y: torch.Tensor) -> float:
        """``Ψ = Σ log p(y | μ + h) − ½ aᵀ h`` (the Laplace objective; ``aᵀh = (f−μ)ᵀK⁻¹(f−μ)``)."""
        ll = self.likelihood.log_likelihood(self.likelihood.unflatten(self.mean + h), y).sum()
        return float(ll) - 0.5 * float(a @ h)

    def _step_size(self, h, a, psi, h_new, a_new, y, gaussian):
        """Step halving on ``Ψ`` along the (inexact) Newton direction; ``step = 0``: none found.

        Ψ at a trial point needs no product with ``K`` (``h`` and ``a = K⁻¹(f − μ)`` are
        both interpolated). A Gaussian likelihood takes the full step (one Newton step is
        the exact posterior mean, as in IterGP).
        """
        if gaussian:
            return 1.0, h_new, a_new, self._objective(h_new, a_new, y)
        slack = 100.0 * torch.finfo(h.dtype).eps * (1.0 + abs(psi))
        step = 1.0
        for _ in range(MAX_HALVINGS):
            h_try = h + step * (h_new - h)
            a_try = a + step * (a_new - a)
            psi_try = self._objective(h_try, a_try, y)
            if psi_try >= psi - slack:
                return step, h_try, a_try, psi_try
            step *= 0.5
        return 0.0, h, a, psi

    def _record(
        self, t: int, state: SolverState, step: float, change: float, psi: float, ah: float
    ) -> None:
        self.steps.append(
            NewtonStep(
                step=t,
                iterations=state.iteration,
                products=state.products,
                buffer_size=0 if self.buffer is None else self.buffer.size,
                change=change,
                log_likelihood=psi + 0.5 * ah,
                step_size=step,
                objective=psi,
            )
        )

    # ------------------------------------------------------------------ prediction
    def _require_fit(self) -> None:
        if self.X is None:
            raise RuntimeError("call fit(X, y) before asking for a posterior")

    def _posterior(
        self, Xs: torch.Tensor, belief, weights: torch.Tensor | None = None
    ) -> GaussianPosterior:
        """Mean ``μ + k(Xs, X) a`` (``a`` = ``weights``, default the belief's mean) and the
        belief's combined covariance."""
        C = self.num_latent
        prior_var = self.kernel.diag(Xs).repeat(C)

        def prior_cov() -> torch.Tensor:
            k = self.kernel(Xs)
            return k if C == 1 else torch.block_diag(*([k] * C))

        return belief_posterior(
            cross=self._cross(Xs),
            prior_var=prior_var,
            prior_cov=prior_cov,
            weights=belief.mean if weights is None else weights,
            V=belief.V,
            offset=self.mean,
            A=self.A,
            num_latent=C,
            projector=self._P,
        )

    def posterior(self, Xs: torch.Tensor) -> GaussianPosterior:
        """Latent posterior at ``Xs`` of shape ``(t, d)`` (Laplace + computational uncertainty).

        Returns
        -------
        GaussianPosterior
            ``mean`` and ``var`` of shape ``(t,)`` (``(t, C)`` for a softmax
            likelihood); ``var`` is the combined variance ``k − k C_i k`` of the last
            Newton step's belief (``≥`` the exact Laplace variance at that mode);
            ``math_var``/``comp_var`` split it on demand with exact solves.
        """
        self._require_fit()
        Xs = check_inputs(Xs, "Xs", self.X.shape[1], like=self.X)
        return self._posterior(Xs, self.belief, self.weights)

    @property
    def f(self) -> torch.Tensor:
        """Latent mode ``μ + K a`` at the training inputs, shape ``(n,)`` or ``(n, C)``.

        For the softmax the Newton loop only tracks the projected part ``P (f − μ)``
        (the likelihood is blind to the rest); the full mode costs one product with
        ``K`` on first access.
        """
        self._require_fit()
        if self._f_cache is None:
            flat = self.mean + (self._h if self._P is None else self.K @ self.weights)
            self._f_cache = self.likelihood.unflatten(flat)
        return self._f_cache

    def predict_proba(
        self,
        Xs: torch.Tensor,
        method: str = "probit",
        num_samples: int = 1000,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Predictive class probabilities (or Poisson rates) at ``Xs``.

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
        """
        return self.predict(Xs, method, num_samples, generator)

    def predict(
        self,
        Xs: torch.Tensor,
        method: str = "probit",
        num_samples: int = 1000,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """The likelihood's prediction at ``Xs``: the same as :meth:`predict_proba`.

        Reads naturally for counts: expected Poisson rates ``E[exp f]`` of shape
        ``(t,)``; for classification, class probabilities.
        """
        self._require_fit()
        Xs = check_inputs(Xs, "Xs", self.X.shape[1], like=self.X)
        post = self.posterior(Xs)
        var = post.var
        with torch.no_grad():
            scale = float(self.kernel.diag(Xs[:1])[0])
        floor = -100.0 * torch.finfo(var.dtype).eps * scale
        if bool((var < floor).any()):
            raise ArithmeticError(
                f"negative latent variance {float(var.min()):.3e}: the belief is inconsistent "
                "with the kernel (was the kernel changed after fit?)"
            )
        return self.likelihood.predict(
            post.mean,
            var.clamp_min(0.0),  # only rounding-level negatives reach here
            method=method,
            num_samples=num_samples,
            generator=generator,
        )


def _sandwich(P: LinearOperator, K: LinearOperator) -> LinearOperator:
    """``P K P`` for a symmetric projector ``P`` (one product with ``K`` per product)."""
    return Closure(
        lambda V: P @ (K @ (P @ V)),
        K.shape,
        dtype=K.dtype,
        device=K.device,
        is_symmetric=True,
        is_psd=True,
    )


def _complement(P: LinearOperator, c: float) -> LinearOperator:
    """``c (I − P)`` for a symmetric projector ``P`` (no product with ``K``)."""
    return Closure(
        lambda V: c * (V - P @ V),
        P.shape,
        dtype=P.dtype,
        device=P.device,
        is_symmetric=True,
        is_psd=True,
    )


def _check_prior(K: object, X: torch.Tensor, C: int) -> LinearOperator:
    if not isinstance(K, LinearOperator):
        raise TypeError(f"K must be a LinearOperator, got {type(K).__name__}")
    N = C * X.shape[0]
    if K.shape != (N, N):
        raise ValueError(f"K must have shape ({N}, {N}), got {tuple(K.shape)}")
    if K.dtype != X.dtype:
        raise TypeError(f"K must have dtype {X.dtype}, got {K.dtype}")
    return K
