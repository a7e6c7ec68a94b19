"""The probabilistic linear solver loop: policy → information operator → belief update → stop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from .._core.precision import ieee_float32
from .._core.stop_reason import StopReason
from .._core.validation import check_finite, check_generator
from ..beliefs.gaussian_solution import GaussianSolutionBelief
from ..beliefs.priors import Prior, as_prior
from ..krylov.mixed_precision import check_precision, low_precision_products
from ..linops.base import LinearOperator
from ..linops.checks import as_system
from ..linops.conversion import as_linop
from ..policies.base import Policy
from ..stopping.base import StoppingCriterion
from .conditioning import Conditioner, NonFiniteObservation
from .reliable_updates import ResidualRefresh
from .state import SolveInfo, SolverState

__all__ = ["PLS_PRECISIONS", "ProbabilisticLinearSolver"]

#: The ``precision`` values of the probabilistic solver (see its ``precision`` argument).
PLS_PRECISIONS = ("full", "mixed")


class ProbabilisticLinearSolver:
    """Solve ``A x = b`` as inference: a Gaussian belief over ``x`` refined by actions.

    Each iteration the **policy** picks actions ``S``, the **information operator**
    applies ``A`` once (``Z = A S``, the only product with ``A`` under the inverse
    prior), the **belief** is conditioned on ``Sᵀ A x = Sᵀ b``, and the **stopping**
    criterion decides whether to go on.

    Every belief says whether it is ``calibrated``: ``True`` while every action came
    from a non-adaptive policy (``policy.adaptive`` is ``False``) and no replayed
    buffer is of unknown provenance (a ``buffer=`` counts as known only when it
    declares ``adaptive = False``; a :class:`~pnsolve.krylov.KrylovBuffer` does not).
    The prior state (no action yet) is calibrated unless a buffer was replayed.

    Parameters
    ----------
    policy
        A :class:`~pnsolve.policies.Policy` (e.g. ``pn.policies.CG()``).
    stopping
        A :class:`~pnsolve.stopping.StoppingCriterion`, e.g.
        ``MaxIterations(50) | ResidualNorm(rtol=1e-6)``.
    prior
        ``"inverse"`` (``Σ₀ = A⁻¹``, default), a positive number ``σ²`` (``Σ₀ = σ² I``),
        an SPD :class:`~pnsolve.linops.LinearOperator`, or a
        :class:`~pnsolve.beliefs.Prior`. The prior mean is ``x0``.
    preconditioner
        ``M ≈ A⁻¹`` made available to policies as ``state.preconditioner`` (the CG
        policy uses it).
    precision
        ``"full"`` (default): products in ``A``'s dtype. ``"mixed"``: the information
        operator multiplies with ``A.to(torch.float32)``; actions, the belief's factors,
        mean and residual stay in float64 (``A`` and ``b`` float64), and the residual is
        replaced by the float64 true residual ``b − A x`` whenever it has dropped by
        :data:`~pnsolve.krylov.RELIABLE_UPDATE_FACTOR` since the last replacement (one
        float64 product, counted in ``products``), so residual stopping tests are of
        the true residual to about ``1e-5`` relative. The rounding bands of the update
        follow float32, and the belief's conjugacy ``VᵀAV = I`` holds to float32's
        :func:`~pnsolve.testing.conjugacy_tol`. TF32 and bfloat16 products are refused:
        the update tells a new direction from rounding by a band of ``10 √n eps``,
        which reaches 1 for bfloat16 at n ≈ 16 (every action would read as dependent)
        and for TF32 at n ≈ 10⁴.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> A = torch.diag(torch.arange(1.0, 6.0, dtype=torch.float64))
    >>> b = torch.ones(5, dtype=torch.float64)
    >>> solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(5))
    >>> belief, info = solver.solve(A, b)
    >>> bool(torch.allclose(belief.mean, 1 / torch.arange(1.0, 6.0, dtype=torch.float64)))
    True
    """

    def __init__(
        self,
        policy: Policy,
        stopping: StoppingCriterion,
        prior: str | float | LinearOperator | Prior = "inverse",
        preconditioner: object = None,
        precision: str = "full",
    ) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(
                f"policy must be a pnsolve.policies.Policy, got {type(policy).__name__}"
            )
        if not isinstance(stopping, StoppingCriterion):
            raise TypeError(
                f"stopping must be a pnsolve.stopping.StoppingCriterion, got "
                f"{type(stopping).__name__}"
            )
        self.policy = policy
        self.stopping = stopping
        self.prior = as_prior(prior)
        self.preconditioner = None if preconditioner is None else as_linop(preconditioner)
        self.precision = check_precision(precision, allowed=PLS_PRECISIONS)

    def __repr__(self) -> str:
        return (
            f"ProbabilisticLinearSolver(policy={self.policy!r}, stopping={self.stopping!r}, "
            f"prior={self.prior!r})"
        )

    def iterate(
        self,
        A: object,
        b: object,
        x0: object = None,
        buffer: object = None,
        generator: torch.Generator | None = None,
    ) -> Iterator[SolverState]:
        """Yield the solver state after each iteration, starting with the prior (iteration 0).

        The last state carries ``stop_reason``. Parameters as in :meth:`solve`; they are
        validated when ``iterate`` is called, before the first state is produced.
        """
        A, b, x0 = self._check(A, b, x0, generator)
        replay = None if buffer is None else _check_buffer(buffer, A)
        record = getattr(buffer, "record", None)
        return self._loop(A, b, x0, replay, record, generator, _known_provenance(buffer))

    def _loop(self, A, b, x0, replay, record, generator, known) -> Iterator[SolverState]:
        products = low_precision_products(A, self.precision)
        refresh = None if products is A else ResidualRefresh(A, b, products)
        with torch.no_grad():
            run = Conditioner(products, self.prior)
            state = self._prior_state(run, A, b, x0, generator)
            if replay is not None:
                state = self._replay(run, state, *replay, known=known)
            state = _replace(state, stopping_memory=self.stopping.initial_memory(state))
            while True:
                reason = state.stop_reason or self.stopping(state)
                state = _replace(state, stop_reason=reason)
                yield state
                if reason is not None:
                    return
                with ieee_float32():  # never TF32/bf16, whatever the caller set
                    S, memory = self.policy(state, generator)  # policy
                    S = _check_actions(S, A, state.iteration, self.policy)
                    Z = _observe(products, S, state.iteration)  # information operator
                    state = self._update(run, state, S, Z, memory)  # belief update
                    if refresh is not None:  # mixed precision: reliable updates
                        state = refresh(state)
                if record is not None and state.stop_reason is not StopReason.BREAKDOWN:
                    record(A, S, Z)  # a Krylov buffer keeps informative actions for later

    def solve(
        self,
        A: object,
        b: object,
        x0: object = None,
        buffer: object = None,
        generator: torch.Generator | None = None,
    ) -> tuple[GaussianSolutionBelief, SolveInfo]:
        """Run to the stopping criterion.

        Parameters
        ----------
        A
            SPD operator of shape ``(n, n)``: anything :func:`~pnsolve.linops.as_linop` accepts.
        b
            Right-hand side, shape ``(n,)``, finite, with ``A``'s dtype and device.
        x0
            Prior mean (default zero), shape ``(n,)``.
        buffer
            Actions observed before, replayed without products with ``A`` (the
            *virtual solver run*: one block conditioning step, dependent directions
            dropped): a :class:`pnsolve.krylov.KrylovBuffer` (images ``A S`` from its
            fixed-part images, and each new action is recorded into it unless the update
            found it entirely dependent on the observed ones), or any object
            with ``actions`` and ``images`` tensors of shape ``(n, m)``
            (``images = A actions``).
            Its actions may have come from earlier, adaptive solves: the belief is
            marked ``calibrated`` after a replay only if the buffer declares
            ``adaptive = False``.
        generator
            Randomness for stochastic policies and sampling (``torch.Generator``).

        Returns
        -------
        belief : GaussianSolutionBelief
            The final belief.
        info : SolveInfo
            Iterations, products, stop reason and residual history.
        """
        norms: list[torch.Tensor] = []
        for state in self.iterate(A, b, x0=x0, buffer=buffer, generator=generator):
            if state.iteration == len(norms):  # a breakdown repeats the last iteration
                norms.append(state.residual_norm)
        return state.belief, SolveInfo.from_history(state, norms)

    # ------------------------------------------------------------------ pieces
    def _check(
        self, A: object, b: object, x0: object, generator: object
    ) -> tuple[LinearOperator, torch.Tensor, torch.Tensor | None]:
        check_generator(generator)
        return as_system(A, b, x0, allow_matrix=False)

    def _prior_state(self, run, A, b, x0, generator) -> SolverState:
        products = 0
        if x0 is None:
            x0, r = torch.zeros_like(b), b.clone()
        else:
            x0, r, products = x0.clone(), b - _observe(A, x0.unsqueeze(-1), -1).squeeze(-1), 1
        V, T, W = run.factors()
        belief = GaussianSolutionBelief(A, b, x0, self.prior, V, T, W, calibrated=True)
        b_norm = torch.linalg.vector_norm(b)
        return SolverState(
            iteration=0,
            belief=belief,
            residual=r,
            residual_norm=torch.linalg.vector_norm(r),
            b_norm=b_norm,
            b_norm_value=float(b_norm) if run.device_path else None,
            products=products,
            matvecs=products,
            policy_memory=self.policy.initial_memory(A, b, generator),
            preconditioner=self.preconditioner,
        )

    def _update(self, run, state, S, Z, memory) -> SolverState:
        try:
            update = run.condition(S, Z, state.residual, state.iteration)
        except NonFiniteObservation:
            raise _non_finite(S, Z, self.policy, state.iteration) from None
        if update.rank_added == 0:
            return _replace(
                state,
                products=state.products + 1 + update.products,
                matvecs=state.matvecs + S.shape[1] + update.matvecs,
                stop_reason=StopReason.BREAKDOWN,
            )
        mean = state.belief.mean + update.dx
        r = state.residual - update.dr
        V, T, W = run.factors()
        calibrated = state.belief.calibrated and not self.policy.adaptive
        return SolverState(
            iteration=state.iteration + 1,
            belief=GaussianSolutionBelief(
                state.A, state.b, mean, self.prior, V, T, W, calibrated=calibrated
            ),
            residual=r,
            residual_norm=torch.linalg.vector_norm(r),
            b_norm=state.b_norm,
            residual_norm_value=update.residual_norm,
            b_norm_value=state.b_norm_value,
            products=state.products + 1 + update.products,
            matvecs=state.matvecs + S.shape[1] + update.matvecs,
            action=S,
            observation=Z,
            policy_memory=memory,
            stopping_memory=state.stopping_memory,
            preconditioner=state.preconditioner,
        )

    def _replay(self, run, state, S, Z, *, known: bool) -> SolverState:
        """Condition on a buffer's actions and images (no product with ``A``).

        ``known``: the buffer declared its actions independent of ``b`` (the belief
        stays calibrated); otherwise a replay that adds a direction ends calibration.
        """
        A = state.A
        if S.shape[1] == 0:
            return state
        update = run.condition(S, Z, state.residual, 0, allow_products=False)
        if update.rank_added == 0:
            return _replace(
                state,
                products=state.products + update.products,
                matvecs=state.matvecs + update.matvecs,
            )
        r = state.residual - update.dr
        V, T, W = run.factors()
        calibrated = state.belief.calibrated and known
        belief = GaussianSolutionBelief(
            A, state.b, state.belief.mean + update.dx, self.prior, V, T, W, calibrated=calibrated
        )
        return _replace(
            state,
            belief=belief,
            residual=r,
            residual_norm=torch.linalg.vector_norm(r),
            residual_norm_value=None,
            products=state.products + update.products,
            matvecs=state.matvecs + update.matvecs,
        )


def _replace(state: SolverState, **changes: Any) -> SolverState:
    from dataclasses import replace

    return replace(state, **changes)


def _known_provenance(buffer: object) -> bool:
    """Whether a buffer declares its actions independent of ``b`` (``adaptive = False``)."""
    return getattr(buffer, "adaptive", True) is False


def _check_buffer(buffer: object, A: LinearOperator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(actions, images)`` of a buffer, checked against ``A``."""
    source: Any = buffer  # duck-typed: whatever has `actions` and `images`, checked below
    try:
        S = source.actions
        images_for = getattr(source, "images_for", None)
        Z = images_for(A) if images_for is not None else source.images
    except AttributeError:
        raise TypeError(
            "buffer must provide `actions` and `images` tensors (images = A @ actions), "
            f"got {type(buffer).__name__}"
        ) from None
    for name, t in (("buffer.actions", S), ("buffer.images", Z)):
        if not isinstance(t, torch.Tensor) or t.ndim != 2 or t.shape[0] != A.shape[0]:
            raise ValueError(f"{name} must be a tensor of shape ({A.shape[0]}, m)")
        if t.dtype != A.dtype or t.device != A.device:
            raise TypeError(f"{name} must have dtype {A.dtype} on {A.device}")
        check_finite(t, name)
    if S.shape != Z.shape:
        raise ValueError("buffer.actions and buffer.images must have the same shape")
    return S, Z


def _check_actions(S: object, A: LinearOperator, iteration: int, policy: Policy) -> torch.Tensor:
    where = f"the action of {type(policy).__name__} at iteration {iteration}"
    if not isinstance(S, torch.Tensor):
        raise TypeError(f"{where} must be a torch.Tensor, got {type(S).__name__}")
    if S.ndim == 1:
        S = S.unsqueeze(-1)
    n = A.shape[0]
    if S.ndim != 2 or S.shape[0] != n or S.shape[1] < 1:
        raise ValueError(f"{where} must have shape ({n},) or ({n}, m), got {tuple(S.shape)}")
    if S.dtype != A.dtype or S.device != A.device:
        raise TypeError(f"{where} has dtype {S.dtype} on {S.device}; A has {A.dtype} on {A.device}")
    return S


def _observe(A: LinearOperator, S: torch.Tensor, iteration: int) -> torch.Tensor:
    """``A @ S``; the initial ``A @ x0`` (``iteration = -1``) is checked finite here.

    Products inside the loop are checked through the curvature ``sᵀ A s`` that the
    belief update computes anyway (no extra pass); see :func:`_non_finite`.
    """
    Z = A @ S
    if iteration < 0 and not bool(torch.isfinite(Z).all()):
        raise ValueError("the product A @ x0 produced NaN or Inf values")
    return Z


def _non_finite(S: torch.Tensor, Z: torch.Tensor, policy: Policy, iteration: int) -> ValueError:
    """Name the culprit once the update has seen a non-finite action or product."""
    if not bool(torch.isfinite(S).all()):
        return ValueError(
            f"the action of {type(policy).__name__} at iteration {iteration} contains NaN "
            "or Inf values"
        )
    if bool(torch.isfinite(Z).all()):
        return ValueError(
            f"the curvature sᵀAs of the action of {type(policy).__name__} at iteration "
            f"{iteration} overflowed (action norm {float(torch.linalg.vector_norm(S)):.1e}); "
            "scale the actions"
        )
    return ValueError(
        f"the product A @ S at iteration {iteration} (0-based) produced NaN or Inf values"
    )
