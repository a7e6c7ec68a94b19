"""Gaussian posteriors over function values at test inputs."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._core import random as rnd
from .._core.precision import full_float32
from .._core.validation import check_generator, check_positive_int

__all__ = ["GaussianPosterior", "NegativeVarianceError", "nonnegative_variance"]


class NegativeVarianceError(ValueError, ArithmeticError):
    """A posterior variance came out negative beyond rounding: the belief is inconsistent.

    A ``ValueError`` (what LOVE raised for negative variances) and an
    ``ArithmeticError`` (what IterNCGP's predictions raised).
    """


def nonnegative_variance(var: torch.Tensor, scale: torch.Tensor, what: str) -> torch.Tensor:
    """``var`` with rounding-level negatives set to 0; raises on clearly negative values.

    A variance formed as a difference (``k(x, x) − kᵀ C k``) of terms of size ``scale``
    is accurate to a few ``eps · scale`` when the terms are exact, and to about
    ``√eps · scale`` when one of them comes out of an iterative solve or a
    decomposition of an ill-conditioned matrix (``√eps`` is also where
    :mod:`pnsolve.metrics.calibration` calls a variance rounding). Values in
    ``[−√eps · scale, 0)`` are rounding and become 0; below that the belief is not what
    it claims (``C ≼ K̂⁻¹`` violated, a kernel changed under it) and the value is
    reported, not hidden.

    Parameters
    ----------
    var
        Variances, shape ``(T,)``.
    scale
        The size of the terms ``var`` is the difference of (the sum of their absolute
        values), shape ``(T,)``.
    what
        The quantity, for the error message (e.g. ``"IterGP's belief"``).

    Returns
    -------
    torch.Tensor
        ``var.clamp_min(0)``, shape ``(T,)``.

    Raises
    ------
    NegativeVarianceError
        If a variance is below ``−√eps · scale``.
    """
    tol = torch.finfo(var.dtype).eps ** 0.5 * scale
    bad = var < -tol
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise NegativeVarianceError(
            f"{what} gives the negative variance {float(var[i]):.3e} at test point {i}, "
            f"beyond rounding for terms of size {float(scale[i]):.3e}: the belief is "
            "inconsistent with the kernel (is K̂ symmetric positive definite, and the "
            "kernel the one it was built from?)"
        )
    return var.clamp_min(0.0)


class GaussianPosterior:
    """``f(Xs) ~ N(mean, cov)`` at ``t`` test inputs.

    Built by the GP models (:class:`~pnsolve.gp.ExactGP`, :class:`~pnsolve.gp.IterGP`,
    :class:`~pnsolve.gp.IterNCGP`, …); users read it. LOVE queries
    (``posterior(Xs, method="love")``) return the subclass
    :class:`~pnsolve.gp.LovePosterior`, which adds the cache and a low-rank sampling root.

    :attr:`mean` and :attr:`var` have shape ``(t,)``, or ``(t, C)`` for ``C`` latent
    functions (multi-class IterNCGP), whose joint covariance :meth:`cov` is stored in
    class-major order ``[f_1(Xs); …; f_C(Xs)]``. For IterGP :attr:`var` is the
    *combined* variance (mathematical + computational).

    Attributes
    ----------
    calibrated
        Whether the computational part of the variance is an honest error bar: the
        posterior comes from exact Gaussian inference on ``y``-independent actions, so
        on data drawn from the GP prior ``z = (mean − exact mean) / √comp_var`` is
        standard normal. ``True`` for :class:`~pnsolve.gp.ExactGP` (no computational
        uncertainty), for IterGP / IterNCGP with a non-adaptive policy
        (``policy.adaptive`` is ``False``, e.g. ``Lanczos(start="random")``,
        ``UnitVector("schur")``, ``Random``) and for LOVE caches whose probe does not
        depend on ``y``. ``False`` for CG, whose computational variance is a heuristic,
        not an error bar (over-confident early, far too wide later).
    comp_var_scale
        The factor applied to the computational variance (``1.0`` unless a rescaling
        heuristic was asked for, e.g. ``IterGP.posterior(Xs, comp_var_scale="residual")``).

    Notes
    -----
    :attr:`var` is never negative: a variance is a difference of terms that cancel
    where the posterior is sure, and rounding can leave it slightly below zero; those
    values are set to zero. A model that passes ``var_scale`` (the size of the terms,
    shape ``(T,)``: ExactGP, IterGP, IterNCGP, AffineGP, LOVE) has clearly negative values
    reported instead (:func:`nonnegative_variance`).

    :attr:`math_var` and :attr:`comp_var` are computed on first access: for an
    iterative GP the split needs exact solves with ``K̂`` (one per test point, batched),
    so it is meant for analysis, not for the fast path.
    """

    def __init__(
        self,
        mean: torch.Tensor,
        var: torch.Tensor,
        cov: Callable[[], torch.Tensor],
        math_var: Callable[[], torch.Tensor] | None = None,
        *,
        num_latent: int = 1,
        calibrated: bool = False,
        comp_var_scale: float = 1.0,
        var_scale: torch.Tensor | None = None,
    ) -> None:
        self.num_latent = num_latent
        self.calibrated = bool(calibrated)
        self.comp_var_scale = float(comp_var_scale)
        self._flat_mean = mean
        if var_scale is not None:
            var = nonnegative_variance(var, var_scale, f"{type(self).__name__}'s variance")
        self._flat_var = var.clamp_min(0.0)
        self._cov = cov
        self._math_var_fn = math_var
        self._math_var: torch.Tensor | None = None
        self._current: Callable[[], None] | None = None

    def tie_to(self, current: Callable[[], None]) -> None:
        """Run ``current()`` before each on-demand computation (the model's check).

        A posterior's on-demand parts (:attr:`math_var`, :meth:`cov`, :meth:`sample`)
        read the model's kernel and fit when they are asked for; the model ties its
        posteriors to the fit they came from, and ``current`` raises once that fit is
        no longer current (hyperparameters changed, or fitted again), so a late
        computation never mixes two states. Parts already computed stay readable.
        """
        self._current = current

    def _check_current(self) -> None:
        if self._current is not None:
            self._current()

    @property
    def mean(self) -> torch.Tensor:
        """Posterior mean, shape ``(t,)`` (``(t, C)`` for ``C`` latent functions)."""
        return self._present(self._flat_mean)

    @property
    def var(self) -> torch.Tensor:
        """Marginal (combined) variance, shape ``(t,)`` (``(t, C)`` for ``C`` latents)."""
        return self._present(self._flat_var)

    @property
    @full_float32
    def math_var(self) -> torch.Tensor:
        """Mathematical (exact-GP) variance, shape of :attr:`var`; computed on first access."""
        if self._math_var_fn is None:
            return self.var
        if self._math_var is None:
            self._check_current()
            self._math_var = self._math_var_fn()
        return self._present(self._math_var)

    @property
    @full_float32
    def comp_var(self) -> torch.Tensor:
        """Computational variance ``var − math_var ≥ 0``, shape of :attr:`var`."""
        return self.var - self.math_var

    def _present(self, flat: torch.Tensor) -> torch.Tensor:
        """Class-major flat ``(C t,)`` as ``(t, C)``; unchanged for one latent function."""
        if self.num_latent == 1:
            return flat
        return flat.reshape(self.num_latent, -1).mT

    @property
    def std(self) -> torch.Tensor:
        """``sqrt(var)``, shape ``(t,)``."""
        return self.var.clamp_min(0.0).sqrt()

    @full_float32
    def cov(self) -> torch.Tensor:
        """The full ``(t, t)`` covariance (forms ``t²`` entries: for small ``t``).

        For ``C`` latent functions: ``(C t, C t)`` in class-major order.
        """
        self._check_current()
        return self._cov()

    @full_float32
    def sample(self, s: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``s`` joint draws at the test inputs, shape ``(t, s)`` (``(t, C, s)`` for ``C`` latents).

        Takes the Cholesky factor of :meth:`cov`, adding a jitter of ``√eps`` times the
        mean variance if the covariance is numerically semi-definite
        (:class:`~pnsolve.gp.LovePosterior` draws through its low-rank root instead).
        """
        check_generator(generator)
        check_positive_int(s, "s")
        return self._present_samples(self._flat_mean.unsqueeze(-1) + self._deviations(s, generator))

    def _deviations(self, s: int, generator: torch.Generator | None) -> torch.Tensor:
        """``s`` draws of ``f − mean`` in flat class-major order, shape ``(C t, s)``."""
        C = self.cov()
        C = 0.5 * (C + C.mT)
        L, info = torch.linalg.cholesky_ex(C)
        if int(info) != 0:
            jitter = torch.finfo(C.dtype).eps ** 0.5 * float(C.diagonal().mean().clamp_min(1e-300))
            L = torch.linalg.cholesky(
                C + jitter * torch.eye(C.shape[0], dtype=C.dtype, device=C.device)
            )
        Z = rnd.randn((C.shape[0], s), generator=generator, dtype=C.dtype, device=C.device)
        return L @ Z

    def _present_samples(self, F: torch.Tensor) -> torch.Tensor:
        if self.num_latent == 1:
            return F
        return F.reshape(self.num_latent, -1, F.shape[-1]).permute(1, 0, 2)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(t={self.mean.shape[0]}, latent={self.num_latent}, "
            f"calibrated={self.calibrated}, dtype={self._flat_mean.dtype})"
        )
