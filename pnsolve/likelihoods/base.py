"""The :class:`Likelihood` protocol and the latent layout every likelihood shares.

A likelihood with ``L = num_latent`` latent functions sees, at ``n`` points, a latent
tensor ``f`` of shape ``(n,)`` when ``L == 1`` and ``(n, C)`` when ``L == C > 1``
(:class:`~pnsolve.likelihoods.Softmax`). The operators :meth:`Likelihood.hessian` and
:meth:`Likelihood.noise` act on the **flat, class-major** latent vector
``flat = f.mT.reshape(-1) = [f[:, 0], f[:, 1], …, f[:, C-1]]`` of length ``C·n``
(all ``n`` values of class 0, then all of class 1, …), i.e. entry ``c·n + i`` is
``f[i, c]``. This is the order of a multi-output GP with independent latent functions
per class: the prior covariance is ``blkdiag(K_0, …, K_{C−1})``. Use
:meth:`Likelihood.flatten` and :meth:`Likelihood.unflatten` to convert.
"""

from __future__ import annotations

import abc

import torch

from .._core import random as rnd
from .._core.validation import (
    check_choice,
    check_finite,
    check_positive_int,
    check_tensor,
    require_generator,
)
from ..linops.base import LinearOperator

__all__ = ["Likelihood", "curvature_floor"]

#: Elements per Monte Carlo chunk (samples × points × classes) in :meth:`Likelihood.predict`.
_MC_CHUNK = 1 << 22


def curvature_floor(dtype: torch.dtype) -> float:
    """Smallest curvature (and class probability) the likelihoods use: ``√eps(dtype)``.

    Diagonal curvatures ``W_ii`` (Bernoulli, Poisson) and the class probabilities in the
    Softmax pseudo-inverse are clamped below at this value, so that ``W⁻¹`` (``W⁺``) stays
    finite and bounded by ``1/√eps`` (``6.7e7`` in float64, ``2.9e3`` in float32): a point
    whose curvature underflows is treated as carrying (numerically) almost no
    information instead of producing ``inf`` noise. The bound keeps the rounding error
    of recovering ``K v = A v − W⁻¹ v`` (IterNCGP) and ``K S = A S − W⁻¹ S`` (Krylov
    buffers) at ``√eps`` relative to the data instead of ``O(1)``. It only changes
    points whose curvature is below ``√eps`` (logit ``|f| ≳ 18`` in float64, ``≳ 8`` in
    float32), whose influence on the posterior is at that level. Curvatures above the
    floor are exact.
    """
    # rounded to the dtype, so that clamped values compare exactly against it (a host scalar)
    return float(torch.tensor(float(torch.finfo(dtype).eps) ** 0.5, dtype=dtype, device="cpu"))


class Likelihood(abc.ABC):
    """A factorising likelihood ``p(y | f) = ∏ᵢ p(yᵢ | fᵢ)`` for Laplace-type GP inference.

    Subclasses supply the per-point log-likelihood, its gradient ``g = ∇_f log p(y|f)``,
    the negative Hessian ``W = −∇²_f log p(y|f)`` (positive semi-definite for the
    log-concave likelihoods here) as a :class:`~pnsolve.linops.LinearOperator`, its
    (pseudo-)inverse as the *noise* of the Newton step's GP regression, and predictions
    from a Gaussian latent marginal.

    Attributes
    ----------
    num_latent
        ``L``: latent functions per data point (``1``; ``C`` for Softmax).
    analytic_methods
        Names accepted by :meth:`predict` for its deterministic rule (besides ``"mc"``).

    Notes
    -----
    ``f`` has shape ``(n,)`` if ``num_latent == 1`` and ``(n, C)`` otherwise; operators
    act on the **class-major** flat vector ``f.mT.reshape(-1)`` of length ``L·n`` and on
    matrices of shape ``(L·n, k)`` (see the module docstring). All outputs follow the
    dtype and device of ``f`` (or ``mean``); targets are cast to ``f``'s dtype.
    Likelihoods are immutable configuration.
    """

    num_latent: int = 1
    analytic_methods: tuple[str, ...] = ("probit",)

    # ------------------------------------------------------------- to implement
    def latent_projector(
        self, n: int, dtype: torch.dtype, device: torch.device
    ) -> LinearOperator | None:
        """Projector onto the latent directions the likelihood depends on, or ``None`` (all).

        The softmax is invariant to adding a constant to every class of a point; its
        projector removes that per-point mean (``P = I − 11ᵀ/C`` per point). IterNCGP
        runs its Newton regressions on the projected prior ``P K P`` so that the Laplace
        covariance ``(K⁻¹ + W)⁻¹`` keeps the prior variance along the uninformed
        directions (using ``W⁺`` with the unprojected ``K`` would treat them as observed
        without noise).
        """
        return None

    @abc.abstractmethod
    def check_targets(self, y: object) -> torch.Tensor:
        """Validate observed targets ``y`` of shape ``(n,)`` and return them as a tensor.

        Raises
        ------
        TypeError, ValueError
            Naming ``y``: not a tensor, wrong shape, NaN/Inf, values outside the support.
        """

    @abc.abstractmethod
    def _log_likelihood(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def _gradient(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def _hessian(self, f: torch.Tensor, y: torch.Tensor) -> LinearOperator: ...

    @abc.abstractmethod
    def _noise(self, f: torch.Tensor, y: torch.Tensor) -> LinearOperator: ...

    @abc.abstractmethod
    def _predict_analytic(self, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def _response(self, f: torch.Tensor) -> torch.Tensor:
        """The quantity :meth:`predict` averages, as a function of latent samples.

        ``f`` has shape ``(s, t)`` (or ``(s, t, C)``); returns ``(s, t)`` (or ``(s, t, C)``).
        """

    # ------------------------------------------------------------------- public
    def log_likelihood(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-point log-likelihood ``log p(yᵢ | fᵢ)``.

        Parameters
        ----------
        f
            Latent values, shape ``(n,)`` (or ``(n, C)`` for Softmax).
        y
            Targets, shape ``(n,)``.

        Returns
        -------
        torch.Tensor
            Shape ``(n,)``, differentiable in ``f``.
        """
        f, y = self._prepare(f, y)
        return self._log_likelihood(f, y)

    def gradient(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``g = ∂ log p(y | f) / ∂f``, same shape as ``f``."""
        f, y = self._prepare(f, y)
        return self._gradient(f, y)

    def hessian(self, f: torch.Tensor, y: torch.Tensor) -> LinearOperator:
        """``W = −∇²_f log p(y | f)`` on the flat class-major latent vector.

        Returns
        -------
        LinearOperator
            Symmetric positive semi-definite, shape ``(L·n, L·n)``, dtype/device of ``f``.
        """
        f, y = self._prepare(f, y)
        return self._hessian(f, y)

    def noise(self, f: torch.Tensor, y: torch.Tensor) -> LinearOperator:
        """``W⁻¹`` (Softmax: the pseudo-inverse ``W⁺``), the Newton step's noise operator.

        An operator like :meth:`hessian`'s: symmetric positive semi-definite, shape
        ``(L·n, L·n)``, dtype/device of ``f``.
        """
        f, y = self._prepare(f, y)
        return self._noise(f, y)

    def predict(
        self,
        mean: torch.Tensor,
        var: torch.Tensor,
        method: str = "probit",
        num_samples: int = 1000,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Predictions from independent Gaussian latent marginals ``fᵢ ~ N(meanᵢ, varᵢ)``.

        Parameters
        ----------
        mean, var
            Latent marginal means and variances, shape ``(t,)`` (or ``(t, C)``); ``var ≥ 0``.
        method
            One of :attr:`analytic_methods` (deterministic; ``"probit"`` is accepted by
            every likelihood and is the default), or ``"mc"``: Monte Carlo average over
            ``num_samples`` latent draws.
        num_samples
            Draws for ``method="mc"``.
        generator
            Source of randomness for ``method="mc"`` (required there: randomness is
            explicit). Draws are made on the generator's device and moved to ``mean``'s
            (a CPU generator gives the same draws on every device).

        Returns
        -------
        torch.Tensor
            What the subclass predicts (see its docstring), dtype/device of ``mean``.
        """
        mean = self._check_latent(mean, "mean")
        var = self._check_latent(var, "var")
        if var.shape != mean.shape:
            raise ValueError(
                f"var must have the shape of mean {tuple(mean.shape)}, got {tuple(var.shape)}"
            )
        if var.dtype != mean.dtype:
            raise TypeError(f"var has dtype {var.dtype} but mean has {mean.dtype}")
        if var.device != mean.device:
            raise ValueError(f"var is on device {var.device} but mean on {mean.device}")
        if bool((var < 0).any()):
            raise ValueError("var must be non-negative")
        if check_choice(method, "method", (*self.analytic_methods, "mc")) == "mc":
            return self._predict_mc(mean, var, num_samples, generator)
        return self._predict_analytic(mean, var)

    # ------------------------------------------------------------------- layout
    def flatten(self, f: torch.Tensor) -> torch.Tensor:
        """Latent ``f`` of shape ``(n,)`` / ``(n, C)`` → class-major flat vector ``(L·n,)``."""
        f = self._check_shape(check_tensor(f, "f"), "f")
        return f if f.ndim == 1 else f.mT.reshape(-1)

    def unflatten(self, flat: torch.Tensor) -> torch.Tensor:
        """Class-major flat vector ``(L·n,)`` → latent of shape ``(n,)`` / ``(n, C)``."""
        flat = check_tensor(flat, "flat")
        L = self.num_latent
        if flat.ndim != 1 or flat.shape[0] % L:
            raise ValueError(f"flat must have shape (L·n,) with L = {L}, got {tuple(flat.shape)}")
        return flat if L == 1 else flat.reshape(L, -1).mT

    # ----------------------------------------------------------------- helpers
    def _check_shape(self, f: torch.Tensor, name: str) -> torch.Tensor:
        L = self.num_latent
        if L == 1 and f.ndim != 1:
            raise ValueError(f"{name} must have shape (n,), got {tuple(f.shape)}")
        if L > 1 and (f.ndim != 2 or f.shape[1] != L):
            raise ValueError(f"{name} must have shape (n, {L}), got {tuple(f.shape)}")
        return f

    def _check_latent(self, f: object, name: str) -> torch.Tensor:
        f = check_tensor(f, name)
        if not f.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {f.dtype}")
        return check_finite(self._check_shape(f, name), name)

    def _prepare(self, f: object, y: object) -> tuple[torch.Tensor, torch.Tensor]:
        """Checked ``f`` and checked ``y`` on ``f``'s device, floating targets in ``f``'s dtype."""
        f = self._check_latent(f, "f")
        y = self.check_targets(y)
        if y.shape[0] != f.shape[0]:
            raise ValueError(f"y has {y.shape[0]} targets but f has {f.shape[0]} points")
        if y.device != f.device:
            raise ValueError(f"y is on device {y.device} but f is on device {f.device}")
        return f, (y.to(f.dtype) if y.is_floating_point() else y)

    def _predict_mc(
        self, mean: torch.Tensor, var: torch.Tensor, num_samples: int, generator: object
    ) -> torch.Tensor:
        check_positive_int(num_samples, "num_samples")
        gen = require_generator(
            generator,
            hint='method="mc" draws random latent samples: pass '
            "generator=torch.Generator().manual_seed(...)",
        )
        std = var.sqrt()
        chunk = max(1, _MC_CHUNK // max(1, mean.numel()))
        total = torch.zeros_like(mean)
        done = 0
        while done < num_samples:
            s = min(chunk, num_samples - done)
            eps = rnd.randn((s, *mean.shape), generator=gen, dtype=mean.dtype, device=mean.device)
            total = total + self._response(mean + std * eps).sum(0)
            done += s
        return total / num_samples
