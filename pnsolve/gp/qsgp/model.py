"""QSGP: a weight-space GP on random Fourier features fit by quadruply stochastic VI."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import torch

from ..._core.precision import full_float32
from ..._core.statefile import DigestCache
from ..._core.validation import (
    check_bool,
    check_choice,
    check_int,
    check_positive_int,
    require_generator,
)
from ...kernels.kernel import Kernel
from ...kernels.random_features import check_spectral_kernel
from ...likelihoods.base import Likelihood
from ...likelihoods.bernoulli import Bernoulli
from ...likelihoods.gaussian import Gaussian
from ...likelihoods.poisson import Poisson
from ..fit_state import Provenance, tie
from ..posterior import GaussianPosterior
from .covariance import COVARIANCES, VariationalCovariance
from .estimator import ControlVariates, estimate
from .exact import exact_elbo
from .features import FeatureBlocks
from .run import HYPER_LR, QSGPTrainingState
from .sampling import draw_indices
from .setup import QSGPSetup

__all__ = ["QSGP"]

#: Likelihoods QSGP accepts: Gaussian (unbiased ELBO) and the log-concave Bernoulli and
#: Poisson (Theorem 3's lower bound).
LIKELIHOODS = (Gaussian, Bernoulli, Poisson)


class QSGP(QSGPSetup):
    """Quadruply stochastic GP (Evans & Nair 2020): ``f(x) = φ(x)ᵀw``, ``q(w) = N(μ, C Cᵀ)``.

    ``φ`` are ``m`` random Fourier features of ``kernel`` (prior ``w ~ N(0, I)``, so
    ``φ(x)ᵀφ(x') ≈ k(x, x')``). Training maximises the ELBO by stochastic gradients whose
    per-iteration cost is independent of ``n`` and ``m``: every estimate samples ``ñ``
    data points and three sets of ``m̃`` basis functions (Theorems 1–2, Proposition 2;
    for Bernoulli and Poisson likelihoods Theorem 3's lower bound with Gauss–Hermite
    quadrature), with control variates on ``n̄`` support points (eq. 3, Proposition 3,
    appendix F); see :mod:`pnsolve.gp.qsgp.estimator`.

    Parameters
    ----------
    kernel
        A stationary kernel (RBF or Matérn, isotropic or ARD). Its hyperparameters are
        learned in place by :meth:`fit` (empirical Bayes) unless frozen there.
    likelihood
        :class:`~pnsolve.likelihoods.Gaussian` (its noise is the starting value of the
        learned ``σ²``), :class:`~pnsolve.likelihoods.Bernoulli` (labels ``{0, 1}``, logit
        or probit) or :class:`~pnsolve.likelihoods.Poisson`.
    num_features
        ``m ≥ 1``.
    covariance
        ``"chevron"`` (default: ``rank`` dense columns, ``O(m · rank)`` parameters),
        ``"diagonal"`` (mean-field, QSGP-0) or ``"full"`` (``m ≤ 4096``).
    rank
        Dense columns of the chevron factor (default ``min(20, m)``; Evans & Nair 2020: 100 in their
        Table 2).
    batch_size
        ``ñ``: data points per estimate.
    feature_batch_size
        ``m̃``: basis functions per index set (``≥ m``: all, the exact ELBO).
    control_variate_rank
        ``n̄``: support points of the control variates (0: none). Gaussian likelihood
        only (the other likelihoods' bound has no quadratic ``Φ`` terms to control).
    linear_control_variate
        Also the control variate of appendix F.2 for ``yᵀΦμ`` (precomputes ``b = Φᵀy``
        once: ``O(n m)``).
    quadrature_points
        Gauss–Hermite points of the non-Gaussian expectations (Evans & Nair 2020: 101).
    generator
        Draws the random features, the support points and the initial state.

    Attributes
    ----------
    mean_weights
        ``μ``, shape ``(m,)`` (after the first :meth:`fit`, :meth:`elbo` or estimate).
    cov
        The :class:`~pnsolve.gp.qsgp.covariance.VariationalCovariance`.
    history
        Per step of :meth:`fit`: ``{"step", "elbo", "seconds"}`` (the ELBO estimate).
    training
        The :class:`~pnsolve.gp.qsgp.run.QSGPTrainingState` after the last :meth:`fit`
        call (the run's identity, steps done, optimiser states), or ``None``.

    Notes
    -----
    ``q`` is trained for the kernel and likelihood hyperparameters it was fitted with
    (the random features follow the kernel's lengthscale). After :meth:`fit`, a
    :meth:`posterior` or :meth:`predict_proba` query refuses once those changed
    (``k.lengthscale = …``, an optimiser step of your own, ``load_state_dict``, the
    likelihood's noise, ``log_noise`` written) with
    :class:`~pnsolve.gp.fit_state.FitChangedError`: ``q`` cannot be recomputed without
    training, so call :meth:`fit` again (it continues from the current ``q`` with the
    new hyperparameters). :meth:`elbo` and :meth:`elbo_estimate` evaluate the objective
    at the current ``q`` and hyperparameters and so are never stale.
    """

    def __init__(
        self,
        kernel: Kernel,
        likelihood: Likelihood,
        num_features: int,
        *,
        covariance: str = "chevron",
        rank: int | None = None,
        batch_size: int = 100,
        feature_batch_size: int = 500,
        control_variate_rank: int = 100,
        linear_control_variate: bool = False,
        quadrature_points: int = 101,
        generator: torch.Generator,
    ) -> None:
        check_spectral_kernel(kernel, "QSGP")
        if not isinstance(likelihood, LIKELIHOODS):
            names = ", ".join(c.__name__ for c in LIKELIHOODS)
            raise TypeError(
                f"likelihood must be one of {names} (log-concave, one latent function), "
                f"got {type(likelihood).__name__}"
            )
        self.kernel, self.likelihood = kernel, likelihood
        self.m = check_positive_int(num_features, "num_features")
        self.covariance_kind = check_choice(covariance, "covariance", COVARIANCES)
        self.rank = min(20, self.m) if rank is None else check_int(rank, "rank", minimum=1)
        # validates covariance/rank now (dtype/device are settled at the first data)
        VariationalCovariance(
            self.m, covariance, self.rank, dtype=torch.float64, device=torch.device("cpu")
        )
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.feature_batch_size = check_positive_int(feature_batch_size, "feature_batch_size")
        self.control_variate_rank = check_int(
            control_variate_rank, "control_variate_rank", minimum=0
        )
        self.linear_control_variate = check_bool(linear_control_variate, "linear_control_variate")
        self.quadrature_points = check_positive_int(quadrature_points, "quadrature_points")
        self.generator = require_generator(generator)
        self.features: FeatureBlocks | None = None
        self.mean_weights: torch.Tensor | None = None
        self.cov: VariationalCovariance | None = None
        self.log_noise: torch.Tensor | None = None
        self.cv: ControlVariates | None = None
        self.cv_data: str | None = None  # digest of the (X, y) the control variates index
        # digest of (X, y), O(1) when a loop passes the same unmodified tensors again
        self.data_digest = DigestCache()
        #: the training run after the last fit call (``None`` before the first)
        self.training: QSGPTrainingState | None = None
        self._rule: tuple[torch.Tensor, torch.Tensor] | None = None
        # what the last fit trained q for (None before a fit: q is then the prior's)
        self._fitted_for: Provenance | None = None

    def _sources(self) -> dict[str, object]:
        """The hyperparameter sources ``q`` is trained for, by name."""
        return {"kernel": self.kernel, "likelihood": self.likelihood, "log_noise": self.log_noise}

    def _check_current(self) -> None:
        """Refuse a query when the hyperparameters changed since the last :meth:`fit`."""
        if self._fitted_for is not None:
            self._fitted_for.check(self._sources(), refit=None, what="fit(X, y, ...)")

    @property
    def steps_done(self) -> int:
        """Training steps taken since the run's first (0 before :meth:`fit`)."""
        return 0 if self.training is None else self.training.steps_done

    @property
    def history(self) -> list[dict[str, float]]:
        """Per step of the run: ``{"step", "elbo", "seconds"}`` (a copy)."""
        return [] if self.training is None else list(self.training.history)

    @property
    def noise(self) -> float:
        """The Gaussian likelihood's (learned) noise variance ``σ²``."""
        if not isinstance(self.likelihood, Gaussian):
            raise AttributeError("noise is defined for a Gaussian likelihood only")
        if self.log_noise is None:
            return float(self.likelihood.noise_variance)
        return math.exp(float(self.log_noise))

    # ----------------------------------------------------------------- queries
    @full_float32
    def elbo(self, X: torch.Tensor, y: torch.Tensor) -> float:
        """The exact ELBO at the current ``q`` and hyperparameters (``O(n m R)``).

        ``X`` of shape ``(n, d)``, ``y`` of shape ``(n,)``; returns a Python float.
        """
        X, y = self.check_data(X, y)
        self.build(X)
        assert self.features is not None and self.cov is not None and self.mean_weights is not None
        assert self.log_noise is not None
        with torch.no_grad():
            value = exact_elbo(
                self.features, self.cov, self.mean_weights, torch.exp(self.log_noise),
                self.likelihood, X, y, self.quadrature(X),
            )  # fmt: skip
        return float(value)

    @full_float32
    def elbo_estimate(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        *,
        generator: torch.Generator,
        control_variates: bool = True,
    ) -> float:
        """One draw of the stochastic ELBO estimate (Gaussian: unbiased; else a lower bound).

        With ``control_variates`` (and ``control_variate_rank > 0``) the support points
        and their products are those of the last :meth:`fit` on the same ``(X, y)``, else
        drawn now with the model's generator (other data gets its own: reusing them
        would bias the estimate).
        ``X`` ``(n, d)``, ``y`` ``(n,)``; ``generator`` (any device: draws are moved to
        ``X``'s) draws the four index sets. Returns a Python float, like :meth:`elbo`.
        """
        X, y = self.check_data(X, y)
        generator = require_generator(generator)
        self.build(X)
        assert self.features is not None and self.cov is not None and self.mean_weights is not None
        cv = self.control_variates_for(X, y) if control_variates else None
        draw = draw_indices(
            X.shape[0], self.m, self.cov.R, self.batch_size, self.feature_batch_size, generator,
            device=X.device,
        )  # fmt: skip
        assert self.log_noise is not None
        with torch.no_grad():
            est = estimate(
                self.features, self.cov, self.mean_weights, torch.exp(self.log_noise),
                self.likelihood, X, y, draw, cv, self.quadrature(X),
            )  # fmt: skip
        return float(est.elbo)

    @full_float32
    def posterior(self, Xs: torch.Tensor, *, chunk_entries: int = 2**22) -> GaussianPosterior:
        """The latent ``f(Xs) = φ(Xs)ᵀw`` under ``q``: ``.mean``, ``.var`` (shape ``(t,)``)."""
        if self.features is None or self.cov is None or self.mean_weights is None:
            raise RuntimeError("fit the model (or evaluate its ELBO) before asking for a posterior")
        self._check_current()
        Xs = self._check_inputs(Xs, "Xs")
        chunk_entries = check_positive_int(chunk_entries, "chunk_entries")
        means, variances = [], []
        with torch.no_grad():
            for _, Phi in self.features.chunks(Xs, max_entries=chunk_entries):
                means.append(Phi @ self.mean_weights)
                variances.append(self.cov.latent_var(Phi))
        mean, var = torch.cat(means), torch.cat(variances)
        features, cov = self.features, self.cov

        def full_cov() -> torch.Tensor:
            with torch.no_grad():
                return cov.latent_cov(features.block(Xs))

        post = GaussianPosterior(mean, var, full_cov)
        if self._fitted_for is not None:
            fitted_for = self._fitted_for
            tie(post, fitted_for, lambda: self._fitted_for, self._sources)
        return post

    @full_float32
    def predict_proba(self, Xs: torch.Tensor) -> torch.Tensor:
        """``p(y = 1 | Xs)`` for a Bernoulli likelihood, shape ``(t,)`` (Gauss–Hermite)."""
        if not isinstance(self.likelihood, Bernoulli):
            raise TypeError("predict_proba needs a Bernoulli likelihood")
        post = self.posterior(Xs)
        nodes, weights = self.quadrature(post.mean)
        f = post.mean.unsqueeze(1) + nodes * post.var.clamp_min(0).sqrt().unsqueeze(1)
        link = torch.sigmoid if self.likelihood.link == "logit" else torch.special.ndtr
        return link(f) @ weights

    @full_float32
    def fit(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        *,
        steps: int = 1000,
        lr: float | None = None,
        generator: torch.Generator,
        hyper_lr: float = HYPER_LR,
        learn_hyperparameters: bool = True,
        freeze_hyperparameters: int | None = None,
        checkpoint: str | Path | None = None,
        checkpoint_every: int = 1000,
        progress: bool = False,
        closed_form_diagonal: bool = False,
        warm_start: int | None = None,
    ) -> QSGP:
        """Maximise the ELBO by stochastic gradients (:func:`pnsolve.gp.qsgp.training.fit`).

        ``steps`` counts from the run's first step: ``fit(steps=20)`` then
        ``fit(steps=40)`` equals one ``fit(steps=40)``; a call with ``steps`` at or below
        the steps done trains nothing and warns, a call on other data continues there
        and warns. Checkpoints carry the run's identity and refuse another run by name.

        **Defaults** (Gaussian likelihood). A fresh run starts warm: ``μ`` from
        ``warm_start`` (default :data:`~pnsolve.gp.qsgp.warm_start.WARM_START_ITERATIONS`
        = 50) CG iterations on the weight-space normal equations and ``C``'s diagonal
        from Proposition 1 (:mod:`pnsolve.gp.qsgp.warm_start`; two passes over ``Φ`` per
        iteration, ``O(n m d)`` each), then AdaGrad at ``lr`` = 0.01
        (:data:`~pnsolve.gp.qsgp.run.WARM_LR`); ``warm_start=0`` starts from the prior
        at the paper's 0.1 (:data:`~pnsolve.gp.qsgp.run.COLD_LR`, also the default for
        other likelihoods). The hyperparameters move by Adam at ``hyper_lr`` = 1e-5 (the
        paper's, :data:`~pnsolve.gp.qsgp.run.HYPER_LR`) from step
        ``freeze_hyperparameters`` on (default
        :data:`~pnsolve.gp.qsgp.run.FREEZE_STEPS` = 100, absolute): QSGP fine-tunes
        hyperparameters, its ELBO's optimum is not the exact GP's (noise too large), so
        start them from an exact GP on a subset (:func:`pnsolve.gp.fit_exact_hyperparameters`,
        the paper's appendix I.1). ``lr=None`` in a later call keeps the run's rate.

        ``closed_form_diagonal``: start the diagonal-only columns of ``C`` at
        Proposition 1's optimum (:meth:`closed_form_diagonal`, one ``O(n m)`` pass)
        instead of the prior's ``c_rr = 1`` (the warm start does this too); they are
        learned afterwards (a fresh run only: later calls warn and ignore it).
        """
        from .training import fit

        if closed_form_diagonal and self.steps_done == 0:
            self.closed_form_diagonal(X, y)
        elif closed_form_diagonal:
            warnings.warn(
                "QSGP.fit: closed_form_diagonal initialises a fresh run; the run has taken "
                f"{self.steps_done} steps, so it is ignored",
                stacklevel=3,
            )
        before = self.steps_done
        try:
            with torch.enable_grad():  # trains by autograd, also when called under no_grad
                fit(
                    self, X, y, steps=steps, lr=lr, generator=generator, hyper_lr=hyper_lr,
                    learn_hyperparameters=learn_hyperparameters,
                    freeze_hyperparameters=freeze_hyperparameters, checkpoint=checkpoint,
                    checkpoint_every=checkpoint_every, progress=progress, warm_start=warm_start,
                )  # fmt: skip
        finally:
            # q's posterior depends on the hyperparameters, not on the training data: the
            # steps taken (all, or up to an interruption) trained q for the values now; a
            # call that took none leaves q trained for what it was trained for before
            if self.steps_done > before:
                self._fitted_for = Provenance.record({}, self._sources())
        return self

    def __repr__(self) -> str:
        return (
            f"QSGP({type(self.kernel).__name__}, {type(self.likelihood).__name__}, m={self.m}, "
            f"covariance={self.covariance_kind!r}, batch_size={self.batch_size}, "
            f"feature_batch_size={self.feature_batch_size})"
        )
