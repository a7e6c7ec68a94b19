"""Pathwise posterior sampling for GP regression (Matheron's rule; Lin et al., eq. 3 and 16).

A posterior function sample is a prior function sample corrected by one solve::

    (f | y)(·) = μ + f(·) + k(·, X) K̂⁻¹ (y − μ − f(X) − ε),   K̂ = K(X, X) + σ² I,

with ``f(·) = φ(·)ᵀ w`` a random-Fourier-feature prior draw (``w ~ N(0, I)``) and
``ε ~ N(0, σ² I)``. The ``s`` samples need ``s`` solves with ``K̂``, done as *one* batched
solve with ``s`` right-hand sides; afterwards a sample is evaluated anywhere with kernel
products only, no further solves.

The one implementation of pathwise sampling in pnsolve: :class:`PathwiseDraws` (the
frozen randomness, its features and prior functions) and :func:`pathwise_update`
(``k(Xs, X) V``) serve both :func:`sample_posterior` and the pathwise marginal-likelihood
estimator (:class:`~pnsolve.gp.mll_estimators.PathwiseEstimator`), whose solves give
``V = v_y − ẑ``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from .._core import random as rnd
from .._core.precision import attainable_rtol, full_float32
from ..kernels.kernel import Kernel
from ..kernels.random_features import (
    RandomFourierFeatures,
    check_spectral_kernel,
    check_spectral_state,
    no_spectral_state,
    rff_features,
)
from ..krylov.conjugate_gradient import cg
from ..linops.base import LinearOperator
from ..linops.scaled_identity import ScaledIdentity
from ._checks import (
    check_finite,
    check_inputs,
    check_mean,
    check_noise,
    check_positive_int,
    check_targets,
    check_tensor,
    require_generator,
)

__all__ = ["PathwiseDraws", "PathwiseSamples", "pathwise_update", "sample_posterior"]

#: Above this many entries of ``K(Xs, X)`` (or ``φ(Xs)``) evaluation goes matrix-free /
#: row-block-wise (2²² entries = 32 MiB in float64).
_DENSE_ENTRIES = 2**22

Solver = Callable[[LinearOperator, torch.Tensor], Any]


def _default_solver(A: LinearOperator, B: torch.Tensor) -> tuple[torch.Tensor, Any]:
    return cg(A, B, rtol=attainable_rtol(B.dtype), maxiter=10 * A.shape[0])


@dataclass(frozen=True, eq=False)
class PathwiseDraws:
    """The frozen randomness of ``s`` pathwise samples (prior draws and noise draws).

    Plain tensors, not tied to a kernel object: features are evaluated under the
    *current* hyperparameters of the kernel passed in, so the same prior draws follow a
    hyperparameter step.

    Attributes
    ----------
    base_frequencies
        RFF base draws (:meth:`~pnsolve.kernels.Kernel.spectral_base`), shape ``(m, w)``.
    phases
        RFF phases ``b ~ U[0, 2π)``, shape ``(m,)``.
    feature_weights
        Prior-function weights ``w_f ~ N(0, I)``, shape ``(m, s)``: ``f_j = φᵀ w_f[:, j]``.
    noise_weights
        Standard-normal noise draws ``w ~ N(0, I)``, shape ``(n, s)``: ``ε_j = σ w_j``.
    spectral_state
        The kernel's ``spectral_state()`` at the draw (float64 CPU, empty for RBF, Matérn).
    """

    base_frequencies: torch.Tensor
    phases: torch.Tensor
    feature_weights: torch.Tensor
    noise_weights: torch.Tensor
    spectral_state: torch.Tensor = field(default_factory=no_spectral_state)

    @classmethod
    def draw(
        cls,
        kernel: Kernel,
        num_features: int,
        num_samples: int,
        X: torch.Tensor,
        generator: torch.Generator,
    ) -> PathwiseDraws:
        """Draw in the documented order, in ``X``'s dtype, on ``generator``'s device.

        Order: ``ε`` and ``b`` as :class:`~pnsolve.kernels.RandomFourierFeatures` draws
        them, then ``w_f`` ``(m, s)``, then ``w`` ``(n, s)``; all moved to ``X``'s device
        (:mod:`pnsolve._core.random`: a CPU generator gives the same draws on every device).

        Parameters
        ----------
        kernel
            A kernel with random Fourier features (its spectral density gives ``ε``).
        num_features, num_samples, X
            ``m``, ``s`` and the training inputs ``(n, d)`` (checked by the caller).
        generator
            The only source of randomness.
        """
        g, dtype, device = generator, X.dtype, X.device
        with torch.no_grad():
            rff = RandomFourierFeatures(
                kernel, num_features, X.shape[1], generator=g, dtype=dtype, device=device
            )
            wf = rnd.randn((num_features, num_samples), generator=g, dtype=dtype, device=device)
            w = rnd.randn((X.shape[0], num_samples), generator=g, dtype=dtype, device=device)
        state = torch.tensor(rff.drawn_spectral_state, dtype=torch.float64, device="cpu")
        return cls(rff.base_frequencies, rff.phases, wf, w, state)

    @property
    def num_samples(self) -> int:
        """Number ``s`` of draws."""
        return self.feature_weights.shape[1]

    @full_float32
    def features(self, kernel: Kernel, X: torch.Tensor) -> torch.Tensor:
        """Random Fourier features of these draws at the kernel's current values, ``(n, m)``.

        :func:`~pnsolve.kernels.random_features.rff_features`; ``X`` is not checked here.
        """
        check_spectral_state(kernel, tuple(self.spectral_state.tolist()))  # CPU: no sync
        m = self.base_frequencies.shape[0]
        return rff_features(kernel, X, self.base_frequencies, self.phases, m)

    @full_float32
    def prior(self, kernel: Kernel, Xs: torch.Tensor) -> torch.Tensor:
        """The prior function draws ``φ(Xs) w_f``, shape ``(t, s)``, in row blocks.

        Blocks of ``2²² / m`` rows bound the memory for large ``t``. ``Xs`` (shape
        ``(t, d)``) is not checked here.
        """
        rows = max(1, _DENSE_ENTRIES // self.base_frequencies.shape[0])
        w = self.feature_weights
        blocks = (Xs[i : i + rows] for i in range(0, Xs.shape[0], rows))
        return torch.cat([self.features(kernel, c) @ w for c in blocks], dim=0)


@full_float32
def pathwise_update(
    kernel: Kernel, Xs: torch.Tensor, X: torch.Tensor, weights: torch.Tensor
) -> torch.Tensor:
    """The data correction ``k(Xs, X) V`` of pathwise samples, shape ``(t, s)``.

    Dense ``kernel(Xs, X)`` up to 2²² entries, else the matrix-free ``kernel.linop``;
    never solves.

    Parameters
    ----------
    kernel
        The kernel (stationary or SKI).
    Xs, X
        Test inputs ``(t, d)`` and training inputs ``(n, d)``.
    weights
        Representer weights ``V``, shape ``(n, s)``.
    """
    if Xs.shape[0] * X.shape[0] <= _DENSE_ENTRIES:
        return kernel(Xs, X) @ weights
    return kernel.linop(Xs, X) @ weights


@dataclass(frozen=True, eq=False)
class PathwiseSamples:
    """``s`` GP posterior function samples, callable at new inputs without new solves.

    Built by :func:`sample_posterior`. ``samples(Xs)`` returns
    ``mean + φ(Xs) w_f + k(Xs, X) weights``, shape ``(t, s)``.

    Attributes
    ----------
    kernel
        The stationary kernel (its *current* hyperparameters are used at evaluation).
    X
        Training inputs, shape ``(n, d)``.
    mean
        Constant prior mean ``μ``, 0-d tensor in ``X``'s dtype/device.
    draws
        The frozen :class:`PathwiseDraws` (``m`` features, ``s`` samples).
    noise_sample
        The noise draw ``ε = σ w ~ N(0, σ² I)``, shape ``(n, s)`` (kept for checks).
    weights
        Representer weights ``v = K̂⁻¹ (y − μ − f(X) − ε)``, shape ``(n, s)``: the result
        of the one batched solve.
    solve_info
        Second element of the solver's return value when it returned a pair (the
        :class:`~pnsolve.krylov.CGInfo` for the default solver; check
        ``solve_info.success``), else ``None``.
    """

    kernel: Kernel
    X: torch.Tensor
    mean: torch.Tensor
    draws: PathwiseDraws
    noise_sample: torch.Tensor
    weights: torch.Tensor
    solve_info: Any = None

    @property
    def num_samples(self) -> int:
        """Number ``s`` of function samples."""
        return self.weights.shape[1]

    @property
    def prior_weights(self) -> torch.Tensor:
        """Feature weights ``w_f`` of the prior function draws, shape ``(m, s)``."""
        return self.draws.feature_weights

    def features(self, Xs: torch.Tensor) -> torch.Tensor:
        """The random Fourier features ``φ(Xs)`` of the prior draws, shape ``(t, m)``."""
        Xs = check_inputs(Xs, "Xs", d=self.X.shape[1], like=self.X)
        return self.draws.features(self.kernel, Xs)

    def prior(self, Xs: torch.Tensor) -> torch.Tensor:
        """The prior function draws ``μ + φ(Xs) w_f`` (no data correction), shape ``(t, s)``."""
        Xs = check_inputs(Xs, "Xs", d=self.X.shape[1], like=self.X)
        return self.mean + self.draws.prior(self.kernel, Xs)

    @full_float32
    def __call__(self, Xs: torch.Tensor) -> torch.Tensor:
        """Evaluate the ``s`` posterior function samples at ``Xs``.

        Parameters
        ----------
        Xs
            Test inputs, shape ``(t, d)``, with the training inputs' dtype and device.

        Returns
        -------
        torch.Tensor
            Shape ``(t, s)``. Uses ``kernel(Xs, X) @ weights`` (the matrix-free
            ``kernel.linop(Xs, X)`` once ``t·n`` exceeds 2²² entries); never solves.
            Autograd reaches ``Xs`` (e.g. for Thompson sampling); ``weights`` and
            the draws are constants.

        Raises
        ------
        TypeError, ValueError
            If ``Xs`` is not a finite floating ``(t, d)`` tensor like ``X``.
        """
        Xs = check_inputs(Xs, "Xs", d=self.X.shape[1], like=self.X)
        update = pathwise_update(self.kernel, Xs, self.X, self.weights)
        return self.mean + self.draws.prior(self.kernel, Xs) + update


@full_float32
def sample_posterior(
    kernel: Kernel,
    X: torch.Tensor,
    y: torch.Tensor,
    noise: float | torch.Tensor,
    num_samples: int,
    *,
    generator: torch.Generator,
    num_features: int = 2048,
    mean: float | torch.Tensor = 0.0,
    solver: Solver | None = None,
) -> PathwiseSamples:
    """Draw GP regression posterior function samples by pathwise conditioning.

    ``(f | y)(·) = μ + f(·) + k(·, X) K̂⁻¹ (y − μ − f(X) − ε)`` with ``f = φᵀ w_f`` a
    random-Fourier-feature prior draw and ``ε ~ N(0, σ² I)`` (Lin et al., eq. 3). All
    ``s`` right-hand sides are solved together in one call of ``solver``, without
    autograd (the samples are not differentiable in the hyperparameters).

    Parameters
    ----------
    kernel
        Stationary kernel (RBF, Matérn) of the prior ``GP(μ, k)``.
    X, y
        Training inputs ``(n, d)`` and targets ``(n,)``: floating, finite, same dtype and
        device. Outputs follow ``X``'s dtype and device.
    noise
        Gaussian noise variance ``σ² > 0`` (number or 0-d tensor).
    num_samples
        Number ``s ≥ 1`` of function samples.
    generator
        ``torch.Generator`` on any device (draws are made there and moved to ``X``'s;
        a CPU generator gives the same samples on every device); the only source of
        randomness. Draw order
        (:meth:`PathwiseDraws.draw`): RFF frequencies and phases, then ``w_f`` ``(m, s)``,
        then ``ε / σ`` ``(n, s)``.
    num_features
        Number ``m`` of random Fourier features. The samples are exact posterior samples
        of the GP whose prior term uses the RFF kernel ``φφᵀ``; the error against the
        exact GP posterior is ``O(1/√m)``.
    mean
        Constant prior mean ``μ`` (finite number or 0-d tensor).
    solver
        ``solver(A, B)`` solving ``A V = B`` for ``A = kernel.linop(X) + σ² I`` (a
        :class:`~pnsolve.linops.LinearOperator`) and the ``(n, s)`` block ``B``; returns
        ``V`` or ``(V, info)`` (``pn.cg`` plugs in: ``lambda A, B: pn.cg(A, B, M=P)``).
        Default: :func:`pnsolve.cg` with ``rtol`` ``1e-10`` (float64) / ``1e-4``
        (float32), ``maxiter = 10 n``; non-convergence is reported in ``solve_info``.

    Returns
    -------
    PathwiseSamples
        Callable ``samples(Xs) -> (t, s)``; ``samples.weights``: ``(n, s)``.

    Raises
    ------
    TypeError, ValueError
        Naming the argument: a bad ``kernel``, ``X``, ``y``, ``noise``, ``num_samples``,
        ``num_features``, ``generator`` (type), ``mean``
        or ``solver`` (not callable, or a result of the wrong shape or with NaN/Inf).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.rand(50, 1, generator=g, dtype=torch.float64)
    >>> f = pn.gp.sample_posterior(pn.kernels.RBF(0.2), X, X[:, 0], 0.01, 8, generator=g)
    >>> f(torch.linspace(0, 1, 100, dtype=torch.float64)[:, None]).shape
    torch.Size([100, 8])
    """
    X, y, noise, mean_t, solver = _check_arguments(
        kernel, X, y, noise, num_samples, num_features, generator, mean, solver
    )
    n, dtype, device = X.shape[0], X.dtype, X.device
    with torch.no_grad():
        draws = PathwiseDraws.draw(kernel, num_features, num_samples, X, generator)
        sigma2 = torch.as_tensor(noise, dtype=dtype, device=device).detach()
        eps = sigma2.sqrt() * draws.noise_weights
        B = (y - mean_t).unsqueeze(-1) - draws.features(kernel, X) @ draws.feature_weights - eps
        A = kernel.linop(X) + ScaledIdentity(n, float(sigma2), dtype=dtype, device=device)
        V, info = _unpack(solver(A, B), (n, num_samples), dtype, device)
    return PathwiseSamples(kernel, X, mean_t, draws, noise_sample=eps, weights=V, solve_info=info)


def _check_arguments(
    kernel: object,
    X: object,
    y: object,
    noise: object,
    num_samples: object,
    num_features: object,
    generator: object,
    mean: object,
    solver: object,
) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor, torch.Tensor, Solver]:
    """The checked ``(X, y, noise, mean, solver)`` of :func:`sample_posterior`."""
    check_spectral_kernel(kernel, "pathwise sampling")
    X = check_inputs(X, "X")
    y = check_targets(y, X)
    noise = check_noise(noise)
    check_positive_int(num_samples, "num_samples")
    check_positive_int(num_features, "num_features")
    require_generator(generator)
    mean_t = _mean_tensor(check_mean(mean), X)
    if solver is None:
        solver = _default_solver
    elif not callable(solver):
        raise TypeError(f"solver must be a callable (A, B) -> V, got {type(solver).__name__}")
    return X, y, noise, mean_t, solver


def _mean_tensor(mean: float | torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """The checked constant ``mean`` as a detached 0-d tensor in ``X``'s dtype and device."""
    if isinstance(mean, torch.Tensor):
        return mean.detach().to(dtype=X.dtype, device=X.device)
    # straight to X's dtype: torch.as_tensor(0.4) would round it to float32 first
    return torch.tensor(float(mean), dtype=X.dtype, device=X.device)


def _unpack(
    result: object, shape: tuple[int, int], dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, Any]:
    """Split a solver result ``V`` or ``(V, info)`` and check ``V``."""
    info = None
    if isinstance(result, tuple):
        if len(result) != 2:
            raise ValueError(f"solver must return V or (V, info), got a {len(result)}-tuple")
        result, info = result
    V = check_tensor(result, "the solver's solution")
    if tuple(V.shape) != shape:
        raise ValueError(
            f"solver returned a solution of shape {tuple(V.shape)}; expected shape {shape}"
        )
    if V.dtype != dtype:
        raise TypeError(f"solver returned a solution of dtype {V.dtype}; expected {dtype}")
    if V.device != torch.device(device):
        raise ValueError(f"solver returned a solution on {V.device}; expected {device}")
    check_finite(V, "the solver's solution")
    return V.detach(), info
