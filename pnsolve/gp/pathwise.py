"""Pathwise posterior sampling for GP regression (Matheron's rule; Lin et al., eq. 3 and 16).

A posterior function sample is a prior function sample corrected by one solve::

    (f | y)(·) = μ + f(·) + k(·, X) K̂⁻¹ (y − μ − f(X) − ε),   K̂ = K(X, X) + σ² I,

with ``f(·) = φ(·)ᵀ w`` a random-Fourier-feature prior draw (``w ~ N(0, I)``) and
``ε ~ N(0, σ² I)``. The ``s`` samples need ``s`` solves with ``K̂``, done as *one* batched
solve with ``s`` right-hand sides; afterwards a sample is evaluated anywhere with kernel
products only, no further solves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .._core.precision import attainable_rtol
from .._core.validation import check_finite, check_tensor
from ..kernels.base import StationaryKernel
from ..kernels.random_features import RandomFourierFeatures
from ..krylov.conjugate_gradient import cg
from ..linops.base import LinearOperator
from ..linops.scaled_identity import ScaledIdentity
from ._checks import check_inputs, check_noise, check_targets

__all__ = ["PathwiseSamples", "sample_posterior"]

#: Above this many entries of ``K(Xs, X)`` (or ``φ(Xs)``) evaluation goes matrix-free /
#: row-block-wise (2²² entries = 32 MiB in float64).
_DENSE_ENTRIES = 2**22

Solver = Callable[[LinearOperator, torch.Tensor], Any]


def _default_solver(A: LinearOperator, B: torch.Tensor) -> tuple[torch.Tensor, Any]:
    return cg(A, B, rtol=attainable_rtol(B.dtype), maxiter=10 * A.shape[0])


@dataclass(frozen=True, eq=False)
class PathwiseSamples:
    """``s`` GP posterior function samples, callable at new inputs without new solves.

    Built by :func:`sample_posterior`. ``samples(Xs)`` returns
    ``mean + φ(Xs) weights_prior + k(Xs, X) weights``, shape ``(t, s)``.

    Attributes
    ----------
    kernel
        The stationary kernel (its *current* hyperparameters are used at evaluation).
    X
        Training inputs, shape ``(n, d)``.
    mean
        Constant prior mean ``μ``, 0-d tensor in ``X``'s dtype/device.
    rff
        The :class:`~pnsolve.kernels.RandomFourierFeatures` of the prior draws (frozen
        frequencies and phases), ``m`` features.
    prior_weights
        Feature weights ``w`` of the prior function draws, shape ``(m, s)``.
    noise_sample
        The noise draw ``ε ~ N(0, σ² I)``, shape ``(n, s)`` (kept for warm starts/checks).
    weights
        Representer weights ``v = K̂⁻¹ (y − μ − f(X) − ε)``, shape ``(n, s)``: the result
        of the one batched solve.
    solve_info
        Second element of the solver's return value when it returned a pair (the
        :class:`~pnsolve.krylov.CGInfo` for the default solver; check
        ``solve_info.success``), else ``None``.
    """

    kernel: StationaryKernel
    X: torch.Tensor
    mean: torch.Tensor
    rff: RandomFourierFeatures
    prior_weights: torch.Tensor
    noise_sample: torch.Tensor
    weights: torch.Tensor
    solve_info: Any = None

    @property
    def num_samples(self) -> int:
        """Number ``s`` of function samples."""
        return self.weights.shape[1]

    def prior(self, Xs: torch.Tensor) -> torch.Tensor:
        """The prior function draws ``μ + φ(Xs) w`` (no data correction), shape ``(t, s)``."""
        Xs = check_inputs(Xs, "Xs", d=self.X.shape[1], like=self.X)
        return self.mean + self._prior(Xs)

    def _prior(self, Xs: torch.Tensor) -> torch.Tensor:
        rows = max(1, _DENSE_ENTRIES // self.rff.num_features)
        w = self.prior_weights
        return torch.cat([self.rff.features(c) @ w for c in Xs.split(rows)], dim=0)

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
            ``prior_weights`` are constants.

        Raises
        ------
        TypeError, ValueError
            If ``Xs`` is not a finite floating ``(t, d)`` tensor like ``X``.
        """
        Xs = check_inputs(Xs, "Xs", d=self.X.shape[1], like=self.X)
        if Xs.shape[0] * self.X.shape[0] <= _DENSE_ENTRIES:
            update = self.kernel(Xs, self.X) @ self.weights
        else:
            update = self.kernel.linop(Xs, self.X) @ self.weights
        return self.mean + self._prior(Xs) + update


def sample_posterior(
    kernel: StationaryKernel,
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

    ``(f | y)(·) = μ + f(·) + k(·, X) K̂⁻¹ (y − μ − f(X) − ε)`` with ``f = φᵀ w`` a
    random-Fourier-feature prior draw and ``ε ~ N(0, σ² I)`` (Lin et al., eq. 3). All
    ``s`` right-hand sides are solved together in one call of ``solver``.

    Parameters
    ----------
    kernel
        Stationary kernel (RBF, Matérn) of the prior ``GP(μ, k)``.
    X
        Training inputs, shape ``(n, d)``, floating, finite. Outputs follow its dtype and
        device.
    y
        Targets, shape ``(n,)``, same dtype and device as ``X``.
    noise
        Gaussian noise variance ``σ² > 0`` (number or 0-d tensor).
    num_samples
        Number ``s ≥ 1`` of function samples.
    generator
        ``torch.Generator`` on ``X``'s device; the only source of randomness. Draw order:
        RFF frequencies and phases, then ``w`` ``(m, s)``, then ``ε`` ``(n, s)``.
    num_features
        Number ``m`` of random Fourier features of the prior draws. The samples are exact
        posterior samples of the GP whose prior covariance is the RFF kernel ``φφᵀ`` in
        the prior term; the error against the exact GP posterior is ``O(1/√m)``.
    mean
        Constant prior mean ``μ`` (finite number or 0-d tensor).
    solver
        Callable ``solver(A, B)`` solving ``A V = B`` for the ``(n, n)`` SPD
        :class:`~pnsolve.linops.LinearOperator` ``A = kernel.linop(X) + σ² I`` and the
        ``(n, s)`` block ``B``; returns ``V`` or a pair ``(V, info)`` (so ``pn.cg`` and
        friends plug in directly, e.g. ``lambda A, B: pn.cg(A, B, rtol=1e-6, M=P)``).
        Default: :func:`pnsolve.cg` with ``rtol`` ``1e-10`` (float64) / ``1e-4``
        (float32) and ``maxiter = 10 n``; non-convergence is reported in
        ``solve_info``, not raised.

    Returns
    -------
    PathwiseSamples
        Callable ``samples(Xs) -> (t, s)``; ``samples.weights`` are the representer
        weights ``(n, s)``.

    Raises
    ------
    TypeError
        For a non-tensor or non-floating ``X``/``y``, dtype or device mismatches, a
        ``generator`` that is not a ``torch.Generator``, a non-kernel ``kernel`` or a
        non-callable ``solver``.
    ValueError
        For bad shapes, NaN/Inf, ``noise ≤ 0``, ``num_samples``/``num_features < 1``, a
        ``generator`` on another device than ``X``, or a solver result of the wrong
        shape or with NaN/Inf.

    Notes
    -----
    Runs without autograd: the samples are not differentiable with respect to the
    hyperparameters (the pathwise gradient *estimator* is a separate piece).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> from pnsolve.gp.pathwise import sample_posterior
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.rand(50, 1, generator=g, dtype=torch.float64)
    >>> y = torch.sin(6 * X[:, 0])
    >>> post = sample_posterior(pn.kernels.RBF(0.2), X, y, 0.01, 8, generator=g)
    >>> post(torch.linspace(0, 1, 100, dtype=torch.float64)[:, None]).shape
    torch.Size([100, 8])
    """
    if not isinstance(kernel, StationaryKernel):
        raise TypeError(
            f"kernel must be a pnsolve.kernels.StationaryKernel, got {type(kernel).__name__}"
        )
    X = check_inputs(X, "X")
    y = check_targets(y, X)
    noise = check_noise(noise)
    for name, value in (("num_samples", num_samples), ("num_features", num_features)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    gdev = torch.device(generator.device)
    if gdev.type != X.device.type or (
        gdev.index is not None and X.device.index is not None and gdev.index != X.device.index
    ):
        raise ValueError(
            f"generator is on device {generator.device} but X is on {X.device}; "
            "create the generator on X's device"
        )
    mean_t = _check_mean(mean, X)
    if solver is None:
        solver = _default_solver
    elif not callable(solver):
        raise TypeError(f"solver must be a callable (A, B) -> V, got {type(solver).__name__}")

    n, d = X.shape
    dtype, device = X.dtype, X.device
    with torch.no_grad():
        rff = RandomFourierFeatures(
            kernel, num_features, d, generator=generator, dtype=dtype, device=device
        )
        w = rff.weights(num_samples, generator=generator, dtype=dtype)
        sigma2 = torch.as_tensor(noise, dtype=dtype, device=device).detach()
        eps = sigma2.sqrt() * torch.randn(
            n, num_samples, generator=generator, dtype=dtype, device=device
        )
        B = (y - mean_t).unsqueeze(-1) - rff.features(X) @ w - eps
        A = kernel.linop(X) + ScaledIdentity(n, float(sigma2), dtype=dtype, device=device)
        V, info = _unpack(solver(A, B), (n, num_samples), dtype, device)
    return PathwiseSamples(
        kernel=kernel,
        X=X,
        mean=mean_t,
        rff=rff,
        prior_weights=w,
        noise_sample=eps,
        weights=V,
        solve_info=info,
    )


def _check_mean(mean: object, X: torch.Tensor) -> torch.Tensor:
    if isinstance(mean, bool) or not isinstance(mean, int | float | torch.Tensor):
        raise TypeError(f"mean must be a number or a 0-d tensor, got {type(mean).__name__}")
    if isinstance(mean, torch.Tensor) and mean.ndim != 0:
        raise ValueError(f"mean must be a scalar (constant mean), got shape {tuple(mean.shape)}")
    m = torch.as_tensor(mean).detach().to(dtype=X.dtype, device=X.device)
    return check_finite(m, "mean")


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
    if tuple(V.shape) != shape or V.dtype != dtype or V.device != torch.device(device):
        raise ValueError(
            f"solver returned a solution of shape {tuple(V.shape)}, dtype {V.dtype} on "
            f"{V.device}; expected shape {shape}, dtype {dtype} on {device}"
        )
    check_finite(V, "the solver's solution")
    return V.detach(), info
