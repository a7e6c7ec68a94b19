"""IterNCGP: Laplace inference for non-conjugate GPs as sequential computation-aware regression.

Seed 001 (Tatzel et al., 2024) and DESIGN §5: Newton step ``t`` on the log posterior is
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
from ..krylov.buffer import KrylovBuffer
from ..likelihoods.base import Likelihood
from ..likelihoods.gaussian import Gaussian
from ..linops.base import LinearOperator
from ..linops.kernel_matrix import KernelMatrix
from ..linops.repeated_block import RepeatedBlockDiagonal
from ..linops.sum import Sum
from ..policies.base import Policy
from ..solvers.solver import ProbabilisticLinearSolver
from ..solvers.state import SolverState
from ..stopping.base import StoppingCriterion
from ._checks import check_inputs
from .belief_posterior import belief_posterior
from .posterior import GaussianPosterior

__all__ = ["IterNCGP", "NewtonStep"]


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
    """

    step: int
    iterations: int
    products: int
    buffer_size: int
    change: float
    log_likelihood: float


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
        Stop when the RMS change of the latent mode ``‖Δf‖ / √N`` falls below it.
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
        y = self.likelihood.check_targets(y)
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
        N = Kop.shape[0]
        self.X, self.y, self.K = X, y, Kop
        self.buffer = KrylovBuffer(Kop) if self.recycle else None
        self.steps: list[NewtonStep] = []
        f = torch.full((N,), self.mean, dtype=X.dtype, device=X.device)
        steps = 1 if isinstance(self.likelihood, Gaussian) else self.max_newton_steps
        with torch.no_grad():
            for t in range(steps):
                F = self.likelihood.unflatten(f)
                g = self.likelihood.flatten(self.likelihood.gradient(F, y))
                noise = self.likelihood.noise(F, y)
                target = (f - self.mean) + noise @ g  # pseudo-targets minus the prior mean
                A = Sum(Kop, noise)
                state = None
                inner = self.solver.iterate(A, target, buffer=self.buffer, generator=generator)
                for state in inner:
                    self.A, self.belief = A, state.belief
                    post = None if Xs is None else self._posterior(Xs, state.belief)
                    yield t, state, post
                v = state.belief.mean
                Kv = target - state.residual - noise @ v  # K v = A v − W⁻¹ v, no K product
                f_new = self.mean + Kv
                change = float(torch.linalg.vector_norm(f_new - f)) / math.sqrt(N)
                f = f_new
                if self.buffer is not None and self.max_rank is not None:
                    self.buffer.compress(self.max_rank, A)
                ll = self.likelihood.log_likelihood(self.likelihood.unflatten(f), y).sum()
                self.steps.append(
                    NewtonStep(
                        step=t,
                        iterations=state.iteration,
                        products=state.products,
                        buffer_size=0 if self.buffer is None else self.buffer.size,
                        change=change,
                        log_likelihood=float(ll),
                    )
                )
                if change <= self.newton_tol:
                    break
        self.f = self.likelihood.unflatten(f)
        self._f_flat = f

    # ------------------------------------------------------------------ prediction
    def _require_fit(self) -> None:
        if self.X is None:
            raise RuntimeError("call fit(X, y) before asking for a posterior")

    def _posterior(self, Xs: torch.Tensor, belief) -> GaussianPosterior:
        C = self.num_latent
        prior_var = self.kernel.diag(Xs).repeat(C)

        def prior_cov() -> torch.Tensor:
            k = self.kernel(Xs)
            return k if C == 1 else torch.block_diag(*([k] * C))

        return belief_posterior(
            cross=self._cross(Xs),
            prior_var=prior_var,
            prior_cov=prior_cov,
            weights=belief.mean,
            V=belief.V,
            offset=self.mean,
            A=self.A,
            num_latent=C,
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
        return self._posterior(Xs, self.belief)

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
        post = self.posterior(Xs)
        return self.likelihood.predict(
            post.mean,
            post.var.clamp_min(0.0),
            method=method,
            num_samples=num_samples,
            generator=generator,
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
