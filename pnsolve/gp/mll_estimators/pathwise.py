"""The pathwise estimator of the marginal-likelihood gradient (Lin et al., §3, eq. 9–11, 16)."""

from __future__ import annotations

import torch

from ...kernels.kernel import Kernel
from ...kernels.random_features import check_spectral_kernel
from .._checks import (
    check_bool,
    check_inputs,
    check_optional_positive_int,
    check_positive_int,
)
from ..pathwise import PathwiseDraws, pathwise_update
from ._frozen import FrozenDraws, check_frozen_like, load_tensors, require_generator
from ._problem import Problem, noise_value
from ._surrogate import accumulate_probe_gradient
from .base import GradientEstimator

__all__ = ["PathwiseDraws", "PathwiseEstimator"]

#: Who needs the stationary kernel (in the error message).
_RFF = "the pathwise estimator (it draws random Fourier features of it)"


class PathwiseEstimator(FrozenDraws, GradientEstimator):
    """Pathwise estimator: probes ``ẑ_j = K̂⁻¹ ξ_j ~ N(0, K̂⁻¹)`` from prior samples.

    ``ξ_j = f_j(X) + σ w_j`` with ``f_j`` a prior function draw by random Fourier features
    and ``w_j ~ N(0, I)``, so ``ξ_j ~ N(0, K̂)`` and ``ẑ_j = K̂⁻¹ ξ_j ~ N(0, K̂⁻¹)``.
    Solving ``K̂ [v_y, ẑ_1, …, ẑ_s] = [y, ξ_1, …, ξ_s]`` gives

        ∂L/∂θ ≈ −½ v_yᵀ (∂K̂/∂θ) v_y + ½ (1/s) Σ_j ẑ_jᵀ (∂K̂/∂θ) ẑ_j

    for ``L = −log p(y | θ)``, computed like :class:`StandardEstimator` as the gradient of
    a surrogate with the vectors fixed, one differentiable row block at a time. The same
    solves give ``s`` posterior function samples ``f_j(·) + k(·, X)(v_y − ẑ_j)``
    (:meth:`posterior_samples`) without another solve.

    Unbiasedness: ``E[ξ ξᵀ] = E_ω[Φ Φᵀ] + σ² I = K̂`` *marginally* over the random
    frequencies; with frozen frequencies the trace term estimates ``tr(K̂⁻¹ (ΦΦᵀ + σ²I)
    K̂⁻¹ ∂K̂)``, an ``O(1/√m)`` perturbation of the exact one.

    Warm starts (Lin et al., §4 and App. B): the base frequencies ``ε``, phases ``b``,
    feature weights ``w_f`` and noise draws ``w`` are drawn once, lazily on the first
    :meth:`targets` call (draw order: ``ε`` and ``b`` as
    :class:`~pnsolve.kernels.RandomFourierFeatures` draws them, then ``w_f`` ``(m, s)``,
    then ``w`` ``(n, s)``; in ``X``'s dtype on ``generator``'s device, then moved to
    ``X``'s). Every call re-evaluates ``ξ`` under the *current* hyperparameters
    (frequencies ``ε / ℓ``, feature scale ``√outputscale``, ``ε = σ w`` with
    ``σ = √noise``), so the same prior draw follows the hyperparameters and the previous
    solution stays a good initial guess. :meth:`resample` draws anew.

    Parameters
    ----------
    num_probes
        Number ``s ≥ 1`` of probes (= posterior samples).
    num_features
        Number ``m ≥ 1`` of random Fourier features (phase form, one frequency each).
    generator, chunk_rows, distributed
        As in :class:`StandardEstimator` (``generator`` is keyword-only and required).

    Raises
    ------
    TypeError
        As :class:`StandardEstimator`, for ``generator``.
    ValueError
        For ``num_probes``, ``num_features`` or ``chunk_rows`` below 1.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.rand(40, 2, dtype=torch.float64); y = torch.sin(4 * X[:, 0])
    >>> k, noise = pn.kernels.Matern(1.5, lengthscale=0.3), 0.1
    >>> est = pn.gp.PathwiseEstimator(8, 256, generator=torch.Generator().manual_seed(0))
    >>> K_hat = k(X).detach() + noise * torch.eye(40, dtype=X.dtype)
    >>> V = torch.linalg.solve(K_hat, est.targets(k, X, noise, y))
    >>> est.backward(k, X, noise, y, V)
    >>> est.posterior_samples(k, X, noise, y, V, X[:5]).shape
    torch.Size([5, 8])
    """

    needs_solves = True

    def __init__(
        self,
        num_probes: int = 64,
        num_features: int = 2000,
        *,
        generator: torch.Generator,
        chunk_rows: int | None = None,
        distributed: bool = False,
    ) -> None:
        self.num_probes = check_positive_int(num_probes, "num_probes")
        self.num_features = check_positive_int(num_features, "num_features")
        self._generator = require_generator(generator)
        self.chunk_rows = check_optional_positive_int(chunk_rows, "chunk_rows")
        self.distributed = check_bool(distributed, "distributed")
        self._draws: PathwiseDraws | None = None

    # ------------------------------------------------------------------ frozen draws
    @property
    def draws(self) -> PathwiseDraws | None:
        """The frozen draws, or ``None`` before the first :meth:`targets` call."""
        return self._draws

    def _clear_draws(self) -> None:
        self._draws = None

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Frozen state as plain tensors.

        The fields of :class:`PathwiseDraws` (once drawn) and ``generator_state`` (the
        generator's state).
        """
        state = {"generator_state": self._generator.get_state()}
        if self._draws is not None:
            for key, value in vars(self._draws).items():
                state[key] = value.clone()
        return state

    def load_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict` output (sets the generator's state if present)."""
        if isinstance(state_dict, dict) and set(state_dict) <= {"generator_state"}:
            draws = None
        else:
            m, s = self.num_features, self.num_probes
            spectral = state_dict.get("spectral_state")  # absent in files before 2026-11-29
            t = load_tensors(
                {key: v for key, v in state_dict.items() if key != "spectral_state"},
                {
                    "base_frequencies": (m, None),
                    "phases": (m,),
                    "feature_weights": (m, s),
                    "noise_weights": (None, s),
                },
            )
            draws = (
                PathwiseDraws(**t)
                if spectral is None
                else PathwiseDraws(**t, spectral_state=spectral.detach().to("cpu", torch.float64))
            )
        if "generator_state" in state_dict:
            self._generator.set_state(state_dict["generator_state"])
        self._draws = draws

    def _draw(self, kernel: Kernel, X: torch.Tensor) -> PathwiseDraws:
        return PathwiseDraws.draw(kernel, self.num_features, self.num_probes, X, self._generator)

    def _require_draws(self, kernel: Kernel, X: torch.Tensor) -> PathwiseDraws:
        if self._draws is None:
            raise RuntimeError("no probes drawn yet: call targets() first")
        self._check_like(self._draws, kernel, X)
        return self._draws

    @staticmethod
    def _check_like(draws: PathwiseDraws, kernel: Kernel, X: torch.Tensor) -> None:
        check_frozen_like(draws.noise_weights, X, "noise draws")
        width = draws.base_frequencies.shape[1]
        if kernel.spectral_width(X.shape[1]) != width:
            raise ValueError(
                f"X has {X.shape[1]} columns but the frozen frequencies were drawn for "
                f"other inputs or another kernel ({width} columns of draws); call resample()"
            )

    # ------------------------------------------------------------------ prior draws
    def features(self, kernel: Kernel, X: torch.Tensor) -> torch.Tensor:
        """Random Fourier features ``φ(X)`` of the frozen draws, shape ``(n, m)``.

        Evaluated under the kernel's current hyperparameters (differentiable;
        ``φ(X) φ(X)ᵀ ≈ K(X, X)``).
        """
        kernel = check_spectral_kernel(kernel, _RFF)
        X = check_inputs(X, "X")
        draws = self._draws
        if draws is None:
            raise RuntimeError("no probes drawn yet: call targets() first")
        eps = draws.base_frequencies
        fits = kernel.spectral_width(X.shape[1]) == eps.shape[1]
        if not fits or X.dtype != eps.dtype or X.device != eps.device:
            raise ValueError(
                f"X must have the columns, dtype {eps.dtype} and device {eps.device} the "
                f"frozen frequencies were drawn for, got shape {tuple(X.shape)}, "
                f"{X.dtype} on {X.device}; call resample() to draw for new data"
            )
        return draws.features(kernel, X)

    def prior_samples(self, kernel: Kernel, Xs: torch.Tensor) -> torch.Tensor:
        """The ``s`` prior function draws ``f_j(Xs) = φ(Xs) w_f[:, j]``, shape ``(t, s)``."""
        draws = self._draws
        if draws is None:
            raise RuntimeError("no probes drawn yet: call targets() first")
        self.features(kernel, Xs[:1])  # the argument checks, once
        return draws.prior(kernel, Xs)

    # --------------------------------------------------------------------- estimator
    def _targets(self, problem: Problem) -> torch.Tensor:
        kernel, X, noise, y = problem
        kernel = check_spectral_kernel(kernel, _RFF)
        with torch.no_grad():
            if self._draws is None:
                self._draws = self._draw(kernel, X)
            draws = self._require_draws(kernel, X)
            xi = self.prior_samples(kernel, X)
            xi.add_(noise_value(noise, X).sqrt() * draws.noise_weights)
            return torch.cat([y.detach().unsqueeze(-1), xi], dim=1)

    def _backward(self, problem: Problem, solutions: torch.Tensor | None) -> None:
        assert solutions is not None  # needs_solves
        if self._draws is not None:
            self._check_like(self._draws, problem.kernel, problem.X)
        accumulate_probe_gradient(
            problem, solutions, solutions, chunk_rows=self.chunk_rows, distributed=self.distributed
        )

    def posterior_samples(
        self,
        kernel: Kernel,
        X: torch.Tensor,
        noise: float | torch.Tensor,
        y: torch.Tensor,
        solutions: torch.Tensor,
        Xs: torch.Tensor,
    ) -> torch.Tensor:
        """Posterior function samples ``f_j(Xs) + k(Xs, X)(v_y − ẑ_j)`` (eq. 16), no solves.

        Pathwise conditioning with ``ξ_j = f_j(X) + ε_j``: ``K̂⁻¹(y − ξ_j) = v_y − ẑ_j``.
        With exact solves the samples are draws from the GP posterior whose *prior* term
        uses the RFF kernel ``φφᵀ`` (mean exact; covariance within ``O(1/√m)``).

        Parameters
        ----------
        kernel, X, noise, y
            As in :meth:`targets` (the hyperparameters of the solve).
        solutions
            ``[v_y, ẑ_1, …, ẑ_s] ≈ K̂⁻¹ targets``, shape ``(n, 1 + s)``.
        Xs
            Test inputs, shape ``(t, d)``, with ``X``'s dtype and device.

        Returns
        -------
        torch.Tensor
            Shape ``(t, s)``: ``K(Xs, X)`` is applied matrix-free once ``t · n`` exceeds
            2²² entries; the caller adds back the mean it subtracted from ``y``.
        """
        (bound, X, _, _), V, Xs = self._checked_query(kernel, X, noise, y, solutions, Xs)
        kernel = check_spectral_kernel(bound, _RFF)
        draws = self._require_draws(kernel, X)
        return draws.prior(kernel, Xs) + pathwise_update(kernel, Xs, X, V[:, :1] - V[:, 1:])

    def __repr__(self) -> str:
        return f"PathwiseEstimator(num_probes={self.num_probes}, num_features={self.num_features})"
