"""CaGP: computation-aware GP regression whose hyperparameters and actions maximise its ELBO."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..._core.precision import full_float32
from ..._core.validation import check_positive_int, require_generator
from ...kernels.kernel import Kernel
from ...linops.base import LinearOperator
from ...linops.scaled_identity import ScaledIdentity
from ...policies.base import Policy
from .._checks import (
    check_backend,
    check_choice,
    check_inputs,
    check_matrix_free_kernel,
    check_mean,
    check_noise,
    check_targets,
)
from .._fitted import FittedModel
from ..belief_posterior import exact_variance
from ..fit_state import own_copy
from ..posterior import GaussianPosterior
from .actions import BLOCKS, BlockActions, kmeans_blocks, random_blocks
from .elbo import CaGPFactors, computation_aware_elbo
from .fit_state import CaGPFitState
from .fixed_actions import dense_action_products, policy_actions
from .products import block_kernel_product

if TYPE_CHECKING:
    from .training import CaGPTraining

__all__ = ["DEFAULT_ACTION_LR", "DEFAULT_LR", "CaGP", "CaGPFitState"]

#: Adam's default rate on the hyperparameters in :meth:`CaGP.fit`: the highest ELBO after
#: 200 steps of 0.1, 0.2, 0.3 and 0.3 decaying, on four UCI sets outside the benchmark's
#: table (``benchmarks/bench_cagp_rates.py``; docs/cagp.md, "Training").
DEFAULT_LR = 0.3

#: Adam's default rate on the learned actions' entries (the former default, kept: 0.03
#: and 0.3 reached a lower ELBO on 5 000 rows of bike and elevators).
DEFAULT_ACTION_LR = 0.1

#: Kernel entries per block of test rows in :meth:`CaGP.posterior` (memory cap).
PREDICTION_ENTRIES = 2**22


class CaGP(FittedModel[CaGPFitState]):
    """Computation-aware GP (Wenger, Wu, Hennig, Gardner, Pleiss & Cunningham 2024).

    The posterior is IterGP's for ``i`` actions ``S`` ``(n, i)``: mean
    ``μ + k(x, X) S v`` and covariance ``k(x, x') − k(x, X) S Ĝ⁻¹ Sᵀ k(X, x')`` with
    ``Ĝ = SᵀK̂S``, ``v = Ĝ⁻¹Sᵀ(y − μ)``; it includes the computational uncertainty of
    using ``i`` projections of the data instead of all ``n`` (never below the exact
    GP's variance). :meth:`fit` chooses the kernel's hyperparameters, the noise and —
    for ``actions="sparse"`` — the actions' entries by maximising the
    computation-aware ELBO (:mod:`pnsolve.gp.cagp.elbo`) with Adam, each step one
    pass over the kernel entries for ``K S`` (``O(n² d)`` time, ``O(n i)`` memory),
    its backward pass and ``O(n i² + i³)`` algebra.

    Parameters
    ----------
    kernel
        A family of :mod:`pnsolve.kernels` or an expression of them; its parameters
        are learned in place.
    noise
        Initial noise variance ``σ² > 0`` (learned; read it back as :attr:`noise`).
    num_actions
        ``i``, at most ``n``.
    actions
        ``"sparse"``: block-sparse actions over all ``n`` points, one block per action,
        learned with the hyperparameters. Or a policy (``pn.policies.Lanczos(
        start="random")``, ``pn.policies.CG()``, …): its first ``i`` actions on ``K̂`` at
        the initial hyperparameters, kept fixed while the hyperparameters are learned.
    blocks
        How points are split into blocks for ``"sparse"``: ``"random"`` (a random
        permutation cut into near-equal blocks) or ``"kmeans"`` (clusters of the
        inputs, a few Lloyd iterations).
    backend
        Kernel-matrix backend for ``K S`` and ``K̂`` (``"auto"``, ``"dense"``,
        ``"chunked"``, ``"keops"``, ``"distributed"``).
    mean
        Constant prior mean ``μ`` (fixed).

    Notes
    -----
    **Under change.** The fit record holds ``L`` and ``v`` for the hyperparameters and
    actions it was computed with. A query after any of them changed (an optimiser
    step, ``k.lengthscale = …``, ``m.noise = …``, the actions written) recomputes them
    first from the same data and actions (one ``K S`` pass): never a stale answer.

    **Calibration.** Learned actions and an adaptive policy's (CG) depend on ``y``:
    the computational variance is then not an error bar (``posterior.calibrated`` is
    ``False``). A non-adaptive policy's actions (``Lanczos(start="random")``) do not,
    and the posterior is exact Gaussian inference given ``Sᵀy`` (``calibrated=True``).
    """

    def __init__(
        self,
        kernel: Kernel,
        noise: float,
        num_actions: int,
        *,
        actions: str | Policy = "sparse",
        blocks: str = "random",
        backend: str = "auto",
        mean: float = 0.0,
    ) -> None:
        self.kernel = check_matrix_free_kernel(kernel, "CaGP")
        check_noise(noise)
        self.log_noise = torch.tensor(math.log(float(noise)), dtype=torch.float64, device="cpu")
        self.num_actions = check_positive_int(num_actions, "num_actions")
        if not (actions == "sparse" or isinstance(actions, Policy)):
            raise TypeError(
                "actions must be 'sparse' (learned block-sparse actions) or a pnsolve policy "
                f"(e.g. pn.policies.Lanczos(start='random')), got {actions!r}"
            )
        self.actions = actions
        self.blocks = check_choice(blocks, "blocks", BLOCKS)
        self.backend = check_backend(backend)
        self.mean = float(check_mean(mean))
        #: the block pattern (``actions="sparse"``), set by the first fit
        self.pattern: BlockActions | None = None
        #: the actions' non-zero entries ``(n,)`` (sparse) or the dense actions ``(n, i)``
        self.action_values: torch.Tensor | None = None
        #: the training run after the last fit call (``None`` before the first)
        self.training: CaGPTraining | None = None

    # ---------------------------------------------------------------- settings
    @property
    def noise(self) -> float:
        """The noise variance ``σ²`` (learned by :meth:`fit`)."""
        return math.exp(float(self.log_noise))

    @noise.setter
    def noise(self, value: float) -> None:
        check_noise(value)
        with torch.no_grad():
            self.log_noise = torch.full_like(self.log_noise, math.log(float(value)))

    @property
    def calibrated(self) -> bool:
        """Whether the actions are independent of ``y`` (a non-adaptive policy's)."""
        return isinstance(self.actions, Policy) and not self.actions.adaptive

    def _sources(self) -> dict[str, object]:
        return {
            "kernel": self.kernel,
            "noise": self.log_noise,
            "mean": self.mean,
            "actions": self.action_values,
        }

    #: whether ``posterior(...).math_var`` is the exact GP's variance (Gaussian likelihood)
    _has_math_var = True

    # ------------------------------------------------------- training protocol
    def place(self, X: torch.Tensor) -> None:
        """Move the model's own tensors to ``X``'s dtype and device (before training)."""
        self.log_noise = self.log_noise.to(device=X.device, dtype=X.dtype)

    def hyperparameter_leaves(self) -> list[torch.Tensor]:
        """What Adam moves at ``lr``: the kernel's raw parameters and ``log σ²``."""
        return [*self.kernel.parameters(), self.log_noise]

    def variational_leaves(self) -> list[torch.Tensor]:
        """What Adam moves at ``action_lr``: the learned actions' entries (if any)."""
        if self.pattern is None or self.action_values is None:
            return []
        return [self.action_values]

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The model's own tensors a checkpoint holds (besides the kernel's state)."""
        out = {"log_noise": self.log_noise}
        if self.action_values is not None:
            out["action_values"] = self.action_values
        return out

    def training_objective(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The ELBO (0-d, differentiable in the leaves) that :meth:`fit` maximises."""
        return self._evaluate(X, y)[0]

    def _evaluate(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, CaGPFactors]:
        """The ELBO and the prediction factors at the model's current tensors."""
        values = self._check_actions_for(X)
        return self._elbo(X, y, values, self.log_noise.to(X.device))

    def _check_data(self, X: object, y: object) -> tuple[torch.Tensor, torch.Tensor]:
        X = check_inputs(X, "X")
        return X, check_targets(y, X)

    # ---------------------------------------------------------------- pieces
    def system(self, X: torch.Tensor) -> LinearOperator:
        """``K̂ = K(X, X) + σ² I`` as a (matrix-free unless ``backend="dense"``) operator."""
        K = self.kernel.linop(X, backend=self.backend)
        return K + ScaledIdentity(X.shape[0], self.noise, dtype=X.dtype, device=X.device)

    def initialise_actions(self, X: torch.Tensor, y: torch.Tensor, generator: torch.Generator):
        """Set the block pattern and entries (``"sparse"``) or run the policy (fixed actions).

        ``X`` ``(n, d)``, ``y`` ``(n,)`` checked. Called by the first :meth:`fit`.
        """
        n, i = X.shape[0], self.num_actions
        if i > n:
            raise ValueError(f"num_actions must be at most n = {n}, got {i}")
        if isinstance(self.actions, Policy):
            S = policy_actions(self.actions, self.system(X), y - self.mean, i, generator)
            self.pattern, self.action_values = None, S
            return
        if self.blocks == "random":
            block_of = random_blocks(n, i, generator, X.device)
        else:
            block_of = kmeans_blocks(X, i, generator)
        self.pattern = BlockActions(block_of, i)
        self.action_values = self.pattern.initial_values(X.dtype, generator)

    def action_products(
        self, X: torch.Tensor, y_centred: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(K S, Sᵀ K S, Sᵀ(y − μ), SᵀS, log |SᵀS|)`` for the entries ``values``.

        ``K S`` is one matrix-free pass over the kernel entries on the model's backend
        (differentiable in the kernel's parameters and in ``values``).
        """
        if self.pattern is None:  # dense (policy) actions
            return dense_action_products(self.kernel, X, self.backend, values, y_centred)
        pattern = self.pattern
        if self.backend in ("keops", "distributed"):  # their operators' own products
            KS = self.kernel.linop(X, backend=self.backend) @ pattern.dense(values)
        else:  # one tiled pass exploiting the sparsity (its own backward)
            KS = block_kernel_product(self.kernel, X, values, pattern.block_of, pattern.num_actions)
        diag = pattern.gram_diagonal(values)
        StKS = pattern.t_matmul(values, KS)
        Sty = pattern.t_matmul(values, y_centred.unsqueeze(1)).squeeze(1)
        return KS, StKS, Sty, torch.diag(diag), torch.log(diag.to(torch.float64)).sum()

    def _elbo(
        self, X: torch.Tensor, y: torch.Tensor, values: torch.Tensor, log_noise: torch.Tensor
    ) -> tuple[torch.Tensor, CaGPFactors]:
        y_c = y - self.mean
        KS, StKS, Sty, gram, log_det = self.action_products(X, y_c, values)
        trace_K = self.kernel.diag(X).sum()
        return computation_aware_elbo(
            KS, StKS, Sty, gram, log_det, y_c, torch.exp(log_noise), trace_K
        )

    def _check_actions_for(self, X: torch.Tensor) -> torch.Tensor:
        if self.action_values is None:
            raise RuntimeError("call fit(X, y, ...) first: the actions are chosen by the fit")
        if self.action_values.shape[0] != X.shape[0]:
            raise ValueError(
                f"X must have the {self.action_values.shape[0]} rows the actions were chosen "
                f"for, got {X.shape[0]}"
            )
        return self.action_values

    # ---------------------------------------------------------------- public
    @full_float32
    def elbo(self, X: torch.Tensor, y: torch.Tensor) -> float:
        """The computation-aware ELBO at the current hyperparameters and actions.

        On the scale of :meth:`ExactGP.log_marginal_likelihood
        <pnsolve.gp.ExactGP.log_marginal_likelihood>` (a sum over the ``n`` points), and
        at most it. ``X`` ``(n, d)`` and ``y`` ``(n,)``: the rows the actions index.
        """
        X, y = self._check_data(X, y)
        with torch.no_grad():
            value, _ = self._evaluate(X, y)
        return float(value)

    @full_float32
    def fit(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        *,
        steps: int = 200,
        lr: float = DEFAULT_LR,
        generator: torch.Generator,
        action_lr: float = DEFAULT_ACTION_LR,
        learn_hyperparameters: bool = True,
        progress: bool = False,
        checkpoint: str | Path | None = None,
        checkpoint_every: int = 50,
    ) -> CaGP:
        """Maximise the ELBO in the hyperparameters (and learned actions) by Adam.

        ``steps`` counts from the run's first step (``fit(steps=100)`` then
        ``fit(steps=200)`` equals one ``fit(steps=200)`` with the same generator object);
        see :func:`pnsolve.gp.cagp.training.train`. ``steps=0`` only initialises the
        actions and computes the posterior's factors.

        Parameters
        ----------
        X, y
            Training inputs ``(n, d)`` and targets ``(n,)``.
        steps
            Adam steps of the run in total.
        lr
            Adam's rate on the raw kernel parameters and ``log σ²`` (default
            :data:`DEFAULT_LR` = 0.3, chosen by the ELBO it reaches in the default 200
            steps on data outside the benchmark's table; docs/cagp.md, "Training").
        generator
            Draws the blocks and initial entries (or the policy's randomness).
        action_lr
            Adam's rate on the actions' entries (default :data:`DEFAULT_ACTION_LR` =
            0.1; the ELBO is invariant to rescaling an action, so this rate is relative
            to the entries' initial size ``1/√|block|``).
        learn_hyperparameters
            ``False`` keeps the kernel and the noise fixed (only the actions learn).
        progress
            Show a tqdm progress bar.
        checkpoint, checkpoint_every
            A checksummed state file written every ``checkpoint_every`` steps; a later
            call resumes from it bit for bit and refuses a file of another run.

        Returns
        -------
        CaGP
            ``self``, with the posterior's factors for the final hyperparameters.
        """
        from .training import train

        X, y = self._check_data(X, y)
        X, y = own_copy(X), own_copy(y)
        generator = require_generator(generator)
        train(
            self, X, y, steps=steps, lr=lr, action_lr=action_lr,
            generator=generator, learn_hyperparameters=learn_hyperparameters,
            progress=progress, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
        )  # fmt: skip
        self._factorise(X, y)
        return self

    def _factorise(self, X: torch.Tensor, y: torch.Tensor) -> None:
        """Store the fit record for the current hyperparameters and actions."""
        provenance = self._provenance(X, y)
        with torch.no_grad():
            value, factors = self._evaluate(X, y)
        self._store(CaGPFitState(provenance, X, y, self.system(X), factors, float(value)))

    def _refit(self, record: CaGPFitState) -> None:
        self._factorise(record.X, record.y)

    @full_float32
    def posterior(self, Xs: torch.Tensor) -> GaussianPosterior:
        """The posterior at test inputs ``Xs`` ``(t, d)``: ``.mean``, ``.var`` (combined).

        Per test point ``O(n d)`` kernel entries, ``O(n)`` for ``Sᵀ k(X, x)`` (block-sparse
        actions; ``O(n i)`` for a policy's dense ones) and one triangular solve
        ``O(i²)`` with the cached factor. ``.math_var`` (the exact GP's variance, by CG
        solves with ``K̂``) and ``.comp_var = var − math_var`` are computed on demand.
        """
        record = self._fitted()
        X = record.X
        Xs = check_inputs(Xs, "Xs", X.shape[1], like=X)
        values = self._check_actions_for(X)
        L, v = record.factors.L, record.factors.v
        rows = max(1, PREDICTION_ENTRIES // X.shape[0])
        means, reductions = [], []
        with torch.no_grad():
            for r0 in range(0, Xs.shape[0], rows):
                Kx = self.kernel(Xs[r0 : r0 + rows], X)  # (t_c, n)
                if self.pattern is None:
                    KxS = Kx @ values
                else:
                    KxS = self.pattern.rmatmul(Kx, values)
                KxS = KxS.to(torch.float64)
                means.append(KxS @ v)
                W = torch.linalg.solve_triangular(L, KxS.mT, upper=False)
                reductions.append(W.square().sum(0))
            prior_var = self.kernel.diag(Xs)
            mean = (self.mean + torch.cat(means)).to(X.dtype)
            reduction = torch.cat(reductions).to(X.dtype)
            var = prior_var - reduction

        A = record.A
        kernel, backend = self.kernel, self.backend

        def cov() -> torch.Tensor:
            with torch.no_grad():
                Kx = kernel(Xs, X)
                KxS = Kx @ values if self.pattern is None else self.pattern.rmatmul(Kx, values)
                W = torch.linalg.solve_triangular(L, KxS.to(torch.float64).mT, upper=False)
                return kernel(Xs) - (W.mT @ W).to(X.dtype)

        def math_var() -> torch.Tensor:
            return exact_variance(kernel.linop(Xs, X, backend=backend), prior_var, A)

        post = GaussianPosterior(
            mean, var, cov, math_var if self._has_math_var else None, calibrated=self.calibrated,
            var_scale=prior_var.abs() + reduction.abs(),
        )  # fmt: skip
        return self._tie(post, record)
