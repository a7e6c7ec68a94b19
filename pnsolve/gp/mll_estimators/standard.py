"""The standard (Hutchinson) estimator of the marginal-likelihood gradient (Lin et al., eq. 6–7)."""

from __future__ import annotations

import torch

from ..._core import random as rnd
from .._checks import (
    check_bool,
    check_choice,
    check_optional_positive_int,
    check_positive_int,
)
from ._frozen import FrozenDraws, check_frozen_like, load_tensors, require_generator
from ._problem import Problem
from ._surrogate import accumulate_probe_gradient
from .base import GradientEstimator

__all__ = ["StandardEstimator"]

_DISTRIBUTIONS = ("gaussian", "rademacher")


class StandardEstimator(FrozenDraws, GradientEstimator):
    """Hutchinson estimator: probes ``z_j`` with ``E[z zᵀ] = I``.

    Solving ``K̂ [v_y, v_1, …, v_s] = [y, z_1, …, z_s]`` gives the unbiased estimate

        ∂L/∂θ ≈ −½ v_yᵀ (∂K̂/∂θ) v_y + ½ (1/s) Σ_j v_jᵀ (∂K̂/∂θ) z_j

    of the gradient of ``L = −log p(y | θ)`` (exact solves; ``z_jᵀ K̂⁻¹ ∂K̂ z_j`` estimates
    ``tr(K̂⁻¹ ∂K̂)``). :meth:`backward` computes it as the gradient of the surrogate
    ``−½ v_yᵀ K̂(θ) v_y + ½ (1/s) Σ_j v_jᵀ K̂(θ) z_j`` with the vectors held fixed, one
    differentiable row block of ``K`` at a time (memory ``O(rows · n)``).

    Warm starts: the probes are drawn once, lazily on the first :meth:`targets` call
    (shape ``(n, s)`` in ``X``'s dtype, drawn on ``generator``'s device and moved to
    ``X``'s), and reused until :meth:`resample`. Reusing them across hyperparameter steps
    makes consecutive solutions close (warm starts) at the price of a small bias.

    Parameters
    ----------
    num_probes
        Number ``s ≥ 1`` of probe vectors.
    distribution
        ``"gaussian"`` (``z ~ N(0, I)``) or ``"rademacher"`` (entries ``±1``; lower
        variance for the diagonal part of the trace).
    generator
        ``torch.Generator``, the only source of randomness (keyword, required).
    chunk_rows
        Rows of each differentiable kernel block in :meth:`backward` (default:
        ``2²¹ // n``).
    distributed
        Inside an initialised torch.distributed default group (every rank calling with
        the same data and draws): each rank differentiates its share of the kernel rows
        in :meth:`backward` and one ``all_reduce`` sums them, so every rank gets the
        full gradient for ``1/P`` of the work (stationary kernels; see
        the "Scaling out" docs page).

    Raises
    ------
    TypeError
        If ``generator`` is missing or not a ``torch.Generator``.
    ValueError
        For ``num_probes < 1``, an unknown ``distribution`` or ``chunk_rows < 1``.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> from pnsolve.gp.mll_estimators import StandardEstimator
    >>> X = torch.rand(40, 2, dtype=torch.float64); y = torch.sin(4 * X[:, 0])
    >>> k, noise = pn.kernels.Matern(1.5, lengthscale=0.3), 0.1
    >>> est = StandardEstimator(8, generator=torch.Generator().manual_seed(0))
    >>> B = est.targets(k, X, noise, y)
    >>> V = torch.linalg.solve(k(X).detach() + noise * torch.eye(40, dtype=X.dtype), B)
    >>> est.backward(k, X, noise, y, V)
    >>> k.raw_lengthscale.grad.shape
    torch.Size([])
    """

    needs_solves = True

    def __init__(
        self,
        num_probes: int = 64,
        distribution: str = "gaussian",
        *,
        generator: torch.Generator,
        chunk_rows: int | None = None,
        distributed: bool = False,
    ) -> None:
        self.num_probes = check_positive_int(num_probes, "num_probes")
        self.distribution = check_choice(distribution, "distribution", _DISTRIBUTIONS)
        self._generator = require_generator(generator)
        self.chunk_rows = check_optional_positive_int(chunk_rows, "chunk_rows")
        self.distributed = check_bool(distributed, "distributed")
        self._probes: torch.Tensor | None = None

    # ------------------------------------------------------------------ frozen draws
    @property
    def probes(self) -> torch.Tensor | None:
        """The frozen probes ``Z``, shape ``(n, s)``, or ``None`` before the first draw."""
        return self._probes

    def _clear_draws(self) -> None:
        self._probes = None

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Frozen state as plain tensors.

        ``probes`` ``(n, s)`` (once drawn) and ``generator_state`` (the generator's
        :meth:`~torch.Generator.get_state`).
        """
        state = {"generator_state": self._generator.get_state()}
        if self._probes is not None:
            state["probes"] = self._probes.clone()
        return state

    def load_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict` output (sets the generator's state if present)."""
        if isinstance(state_dict, dict) and set(state_dict) <= {"generator_state"}:
            probes = None
        else:
            probes = load_tensors(state_dict, {"probes": (None, self.num_probes)})["probes"]
        if "generator_state" in state_dict:
            self._generator.set_state(state_dict["generator_state"])
        self._probes = probes

    def _draw(self, X: torch.Tensor) -> torch.Tensor:
        g = self._generator
        shape = (X.shape[0], self.num_probes)
        if self.distribution == "gaussian":
            return rnd.randn(shape, generator=g, dtype=X.dtype, device=X.device)
        return rnd.rademacher(shape, generator=g, dtype=X.dtype, device=X.device)

    # --------------------------------------------------------------------- estimator
    def _targets(self, problem: Problem) -> torch.Tensor:
        if self._probes is None:
            self._probes = self._draw(problem.X)
        check_frozen_like(self._probes, problem.X, "probes")
        return torch.cat([problem.y.detach().unsqueeze(-1), self._probes], dim=1)

    def _backward(self, problem: Problem, solutions: torch.Tensor | None) -> None:
        assert solutions is not None  # needs_solves
        if self._probes is None:
            raise RuntimeError("no probes drawn yet: call targets() before backward()")
        check_frozen_like(self._probes, problem.X, "probes")
        W = torch.cat([solutions[:, :1], self._probes], dim=1)
        accumulate_probe_gradient(
            problem, solutions, W, chunk_rows=self.chunk_rows, distributed=self.distributed
        )

    def __repr__(self) -> str:
        return (
            f"StandardEstimator(num_probes={self.num_probes}, distribution={self.distribution!r})"
        )
