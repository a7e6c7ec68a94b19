"""Stochastic gradients of the log marginal likelihood in log space.

Eqs. 8–9 of Filippone & Engler (2015).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..._core import random as rnd
from ..._core.validation import check_int, check_positive_int, require_generator
from ...kernels.backends import choose_backend
from ...kernels.base import StationaryKernel
from ...kernels.kernel_matrix import KernelMatrix
from ...krylov.conjugate_gradient import cg
from ...linops.base import LinearOperator
from ...linops.scaled_identity import ScaledIdentity
from ...preconditioners.pivoted_cholesky import PivotedCholesky
from ...randomized.ulisse import ulisse
from ..mll_estimators._surrogate import accumulate_surrogate_gradient
from .dense_surrogate import DenseSurrogate
from .exact import exact_log_marginal
from .hyperparameters import LogHyperparameters

__all__ = ["GRADIENTS", "REFACTOR_EVERY", "GradientEstimate", "LogMarginalGradient"]

#: Calls between rebuilds of the preconditioner's factor (at the ``θ`` of that call).
REFACTOR_EVERY = 20

#: ``"ulisse"``: unbiased (randomized truncation); ``"cg"``: CG stopped at the early
#: threshold (biased); ``"exact"``: Cholesky and autograd.
GRADIENTS = ("ulisse", "cg", "exact")


@dataclass(frozen=True)
class GradientEstimate:
    """One estimate of ``∇_θ log p(y | X, θ)``.

    Attributes
    ----------
    grad
        The estimate, float64, shape ``(p,)``.
    products
        Block products with ``K̂`` spent (0 for ``"exact"``).
    matvecs
        Columns multiplied with ``K̂`` over those products.
    redrawn
        Whether the probes were drawn anew for this estimate.
    """

    grad: torch.Tensor
    products: int
    matvecs: int
    redrawn: bool


class LogMarginalGradient:
    """Estimates of ``g = ∇_θ log p(y | X, θ)`` along a chain of ``θ`` (Filippone & Engler).

    With ``K̂ = K(θ) + λ I``, ``g_i = −½ tr(K̂⁻¹ ∂_i K̂) + ½ yᵀK̂⁻¹ ∂_i K̂ K̂⁻¹y`` (eq. 8). The
    trace is estimated with ``Nr`` Rademacher probes ``r_j`` (eq. 9):

    ``g̃_i = −(1/2Nr) Σ_j ũ_jᵀ ∂_i K̂ r_j + ½ ãᵀ ∂_i K̂ b̃``,

    where ``ũ_j ≈ K̂⁻¹ r_j`` and ``ã, b̃`` are two *independent* estimates of ``K̂⁻¹ y``.
    With ``method="ulisse"`` they are unbiased (:func:`pnsolve.randomized.ulisse`: CG to
    the early threshold ``alpha``, then Russian roulette with weights
    ``w_r = exp(β r)``; ``ã`` and ``b̃`` are two roulette draws along one CG run), so
    ``E[g̃] = g`` exactly. ``"cg"`` stops CG at the threshold (after at least one step,
    like ULISSE's deterministic part) and uses its iterate for every solve
    (``ã = b̃``): cheaper but biased. ``"exact"`` is the Cholesky gradient.
    The products ``∂_i K̂`` never form a matrix: the bilinear forms are differentiated
    one row block of ``K(X, X)`` at a time.

    The probes are kept for ``redraw_every`` calls and then redrawn; in between, every
    solve starts from the previous call's CG iterate for the same right-hand side
    (``info.cg_iterate``), which is close when ``θ`` moves little. The estimate stays
    unbiased whatever the starting point.

    CG is preconditioned by ``P = L Lᵀ + λ I``, ``L`` a pivoted partial Cholesky factor
    of ``K̂`` (rank ``preconditioner_rank``), built at the ``θ`` of every
    :data:`REFACTOR_EVERY`-th call (its :attr:`anchor`) and kept in between:
    ``θ`` moves little over ``redraw_every`` calls, and CG converges for any SPD
    preconditioner, so the estimate stays unbiased while a stale factor costs only
    speed. On ill-conditioned ``K̂`` (small noise) it cuts the products per call
    several-fold and shortens the roulette's tail: the CG increments past the
    threshold shrink faster.

    Parameters
    ----------
    params
        The :class:`LogHyperparameters` (kernel, parametrization).
    X, y
        Inputs ``(n, d)`` and targets ``(n,)``, same dtype.
    method
        ``"ulisse"`` (default), ``"cg"`` or ``"exact"``.
    generator
        Draws the probes and the roulette (required except for ``"exact"``); any device
        (drawn there, moved to ``X``'s).
    num_probes
        ``Nr`` (the paper's: 4).
    redraw_every
        Calls between probe redraws (the paper's: 20).
    alpha
        Early threshold on the residual norm, absolute as in the paper (default ``√n``:
        ``q = 1`` for standardised targets and Rademacher probes, ``‖r‖ = √n``).
    beta
        Roulette rate ``β`` (the paper's: 1).
    maxiter
        CG steps at most per solve (default ``10 n``); a ULISSE estimate cut by it is
        biased and raises ``ArithmeticError``.
    preconditioner_rank
        Pivots of the preconditioner (default 100, capped at ``n``; ``0``: plain CG, as
        in the paper). Its factorisation reads one column of ``K̂`` per pivot.
    backend
        ``KernelMatrix`` backend for the products (``"auto"``: dense when it fits).

    Notes
    -----
    *Cost per call*: one block CG run on ``1 + Nr`` columns (``"ulisse"``: to the
    threshold plus the roulette steps; the expected number after the threshold is
    ``Σ_j exp(−β j(j+1)/2)`` ≈ 0.42 for ``β = 1``), and the bilinear forms: where
    ``K̂`` is stored anyway (the dense backend) and the kernel is isotropic, three passes
    over stored squared distances (:class:`~pnsolve.gp.bayes.dense_surrogate.DenseSurrogate`),
    else one pass over ``K(X, X)`` row blocks with autograd (no ``n × n`` object).
    *Variance*: finite only while the CG increments shrink faster than the roulette
    weights grow (see :func:`pnsolve.randomized.ulisse`); ill-conditioned ``K̂`` give
    heavy-tailed estimates.
    """

    def __init__(
        self,
        params: LogHyperparameters,
        X: torch.Tensor,
        y: torch.Tensor,
        *,
        method: str = "ulisse",
        generator: torch.Generator | None = None,
        num_probes: int = 4,
        redraw_every: int = 20,
        alpha: float | None = None,
        beta: float = 1.0,
        maxiter: int | None = None,
        backend: str = "auto",
        preconditioner_rank: int = 100,
    ) -> None:
        if method not in GRADIENTS:
            raise ValueError(f"method must be one of {GRADIENTS}, got {method!r}")
        if not isinstance(X, torch.Tensor) or X.ndim != 2:
            raise ValueError("X must be a tensor of shape (n, d)")
        if not isinstance(y, torch.Tensor) or y.shape != (X.shape[0],) or y.dtype != X.dtype:
            raise ValueError(f"y must be a tensor of shape ({X.shape[0]},) with X's dtype")
        self.params, self.X, self.y, self.method = params, X, y, method
        self.generator = None if method == "exact" else require_generator(generator)
        self.num_probes = check_positive_int(num_probes, "num_probes")
        self.redraw_every = check_positive_int(redraw_every, "redraw_every")
        n = X.shape[0]
        self.alpha = math.sqrt(n) if alpha is None else float(alpha)
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be a non-negative finite number, got {alpha!r}")
        self.beta = float(beta)
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"beta must be a positive finite number, got {beta!r}")
        self.maxiter = 10 * n if maxiter is None else check_positive_int(maxiter, "maxiter")
        self.backend = backend
        # dense regime, isotropic kernel: K̂ and the surrogate gradient from stored
        # squared distances (same values to rounding, several times faster)
        dense = backend == "dense" or (
            backend == "auto" and choose_backend(n, n, X.dtype, X.device) == "dense"
        )
        self.dense: DenseSurrogate | None = (
            DenseSurrogate(params, X)
            if dense and method != "exact" and _isotropic(params)
            else None
        )
        self.preconditioner_rank = check_int(preconditioner_rank, "preconditioner_rank", minimum=0)
        self.calls = 0
        self.probes: torch.Tensor | None = None
        self.warm: torch.Tensor | None = None
        # the preconditioner: built at ``anchor`` (a θ) every REFACTOR_EVERY calls
        self.anchor: torch.Tensor | None = None
        self._M: tuple[torch.Tensor, LinearOperator | None] | None = None

    def system(self, theta: torch.Tensor) -> LinearOperator:
        """``K̂(θ) = K(X, X; θ) + λ I`` as an operator."""
        if self.dense is not None:
            return self.dense.system(theta)
        kernel = self.params.kernel_at(theta)
        n = self.X.shape[0]
        noise = self.params.noise_at(theta)
        K = KernelMatrix(kernel, self.X, backend=self.backend)
        return K + ScaledIdentity(n, noise, dtype=self.X.dtype, device=self.X.device)

    def __call__(self, theta: torch.Tensor) -> GradientEstimate:
        """An estimate of ``∇_θ log p(y | X, θ)`` at ``theta`` (shape ``(p,)``)."""
        theta = self.params.check(theta)
        if self.method == "exact":
            _, grad = exact_log_marginal(self.params, self.X, self.y, theta, grad=True)
            if grad is None:
                raise ArithmeticError(f"K̂ is not positive definite at theta={theta.tolist()}")
            return GradientEstimate(grad, 0, 0, False)
        redrawn = self.probes is None or self.calls % self.redraw_every == 0
        if redrawn:
            self._redraw()
        if self.anchor is None or self.calls % REFACTOR_EVERY == 0:
            self.anchor = theta.clone()
        self.calls += 1
        # the factor first: the dense surrogate differentiates its last system, θ's
        M = self._preconditioner()
        A = self.system(theta)
        assert self.probes is not None and self.generator is not None
        B = torch.cat([self.y.unsqueeze(-1), self.probes], dim=1)  # (n, 1 + Nr)
        with torch.no_grad():
            if self.method == "ulisse":
                x, info = ulisse(
                    A, B, alpha=self.alpha, beta=self.beta, generator=self.generator,
                    x0=self.warm, maxiter=self.maxiter, M=M, num_estimates=2,
                    variance=False,
                )  # fmt: skip
                if not bool((info.by_roulette | info.converged).all()):
                    raise ArithmeticError(
                        f"ULISSE was cut by maxiter={self.maxiter} (a biased estimate); "
                        "raise maxiter or alpha"
                    )
                self.warm = info.cg_iterate.clone()
                a, b, U = x[0][:, 0], x[1][:, 0], x[0][:, 1:]
                products, matvecs = info.products, info.matvecs
            else:
                # ULISSE's deterministic part: CG until ‖r‖ ≤ alpha, at least one step
                # per column; only columns already within alpha at the warm start
                # (no step taken) need the extra step
                sol, cinfo = cg(
                    A, B, self.warm, rtol=0.0, atol=self.alpha, maxiter=self.maxiter, M=M
                )
                products, matvecs = cinfo.products, cinfo.matvecs
                idle = cinfo.column_iterations.reshape(-1) == 0
                if bool(idle.any()):
                    cols = idle.nonzero().squeeze(1)
                    step, extra = cg(
                        A, B[:, cols], sol[:, cols], rtol=0.0, atol=0.0, maxiter=1, M=M
                    )
                    sol[:, cols] = step
                    products, matvecs = products + extra.products, matvecs + extra.matvecs
                self.warm = sol.clone()
                a = b = sol[:, 0]
                U = sol[:, 1:]
        grad = self._surrogate_gradient(theta, a, b, U)
        return GradientEstimate(grad, products, matvecs, redrawn)

    def _surrogate_gradient(
        self, theta: torch.Tensor, a: torch.Tensor, b: torch.Tensor, U: torch.Tensor
    ) -> torch.Tensor:
        """``∇_θ [½ aᵀK̂b − (1/2Nr) Σ_j u_jᵀ K̂ r_j]`` (``a, b, U`` held fixed)."""
        assert self.probes is not None
        s = self.num_probes
        left = torch.cat([0.5 * a.unsqueeze(-1), (-0.5 / s) * U], dim=1)
        right = torch.cat([b.unsqueeze(-1), self.probes], dim=1)
        if self.dense is not None:
            return self.dense.gradient(left, right)
        kernel = self.params.kernel  # kernel_at(theta) was called by system()
        accumulate_surrogate_gradient(
            kernel, self.X, 0.0, left, right, distributed=self.backend == "distributed"
        )
        noise_grad = float((left * right).sum())
        return self.params.chain_rule(theta, noise_grad)

    def _preconditioner(self) -> LinearOperator | None:
        """The pivoted-Cholesky preconditioner of ``K̂`` at :attr:`anchor` (cached)."""
        if self.preconditioner_rank == 0 or self.anchor is None:
            return None
        if self._M is None or not torch.equal(self._M[0], self.anchor):
            # P = L Lᵀ + λ I (D = λ I, GPyTorch's construction): at least λ on every
            # direction, so it stays SPD to rounding even at full rank, where the
            # residual diagonal of K̂ (the default D) vanishes and its inverse blows up
            noise = self.params.noise_at(self.anchor)
            rank = min(self.preconditioner_rank, self.X.shape[0])
            with torch.no_grad():  # the factor needs values only, no graph
                at = self.system(self.anchor)
                self._M = (self.anchor.clone(), PivotedCholesky(at, rank, shift=noise))
        return self._M[1]

    def _redraw(self) -> None:
        """New Rademacher probes; the probe columns' warm starts restart from zero."""
        n = self.X.shape[0]
        X, g = self.X, self.generator
        self.probes = rnd.rademacher(
            (n, self.num_probes), generator=g, dtype=X.dtype, device=X.device
        )
        if self.warm is not None:
            self.warm = self.warm.clone()
            self.warm[:, 1:] = 0.0

    def state_dict(self) -> dict[str, object]:
        """Probes, warm starts and the call counter (for checkpoints; not the generator)."""
        return {
            "calls": self.calls,
            "probes": self.probes,
            "warm": self.warm,
            "anchor": self.anchor,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict` (the generator's state is restored by its owner)."""
        calls, probes, warm = state["calls"], state["probes"], state["warm"]
        if not isinstance(calls, int) or calls < 0:
            raise ValueError(f"state['calls'] must be a non-negative int, got {calls!r}")
        self.calls = calls
        # checkpoint files hold CPU tensors: back to the data's device
        device = self.X.device
        self.probes = None if probes is None else torch.as_tensor(probes, device=device).clone()
        self.warm = None if warm is None else torch.as_tensor(warm, device=device).clone()
        anchor = state.get("anchor")
        self.anchor = None if anchor is None else torch.as_tensor(anchor, device=device).clone()
        self._M = None  # rebuilt from the anchor: the same factor as the run that saved it

    def __repr__(self) -> str:
        return (
            f"LogMarginalGradient(method={self.method!r}, num_probes={self.num_probes}, "
            f"redraw_every={self.redraw_every}, alpha={self.alpha:.4g}, beta={self.beta:g}, "
            f"preconditioner_rank={self.preconditioner_rank})"
        )


def _isotropic(params: LogHyperparameters) -> bool:
    """Whether the dense surrogate applies: an RBF or Matérn kernel with one lengthscale."""
    k = params.kernel
    return not params.generic and isinstance(k, StationaryKernel) and k.ard_dims is None
