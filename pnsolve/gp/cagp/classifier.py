r"""Computation-aware variational classification: CaGP's family for non-Gaussian likelihoods.

**The family.** With a non-Gaussian likelihood there is no ``Sᵀy`` to condition on, so
the projected data become variational parameters: ``i`` pseudo-targets ``u`` with
pseudo-noise ``D = diag(d)`` (``d > 0``), observed through the same block-sparse
actions ``S``. ``q(f)`` is the GP posterior given ``Sᵀf + η = u``, ``η ~ N(0, D)``:

* ``m = μ + K S v``, ``v = Ĝ⁻¹ (u − Sᵀμ)``, ``Ĝ = SᵀKS + D``,
* ``Σ = K − K S Ĝ⁻¹ Sᵀ K``.

Every ``q`` of this form has rank-``i`` computation (the posterior of ``i``
projections), the same ``O(n i)`` memory and ``O(i²)`` prediction as CaGP, and with
``D = σ² SᵀS``, ``u = Sᵀy`` it is CaGP's Gaussian posterior.

**The ELBO.** ``Σ_j E_{N(m_j, Σ_jj)} log p(y_j | f_j) − KL(q ‖ p)``; the expectations are
one-dimensional Gauss–Hermite sums and, exactly as for CaGP (the derivation in
:mod:`pnsolve.gp.cagp.elbo` with ``σ² SᵀS`` replaced by ``D``),
``KL = ½ [vᵀGv + log |Ĝ| − Σ_j log d_j − tr(Ĝ⁻¹G)]``, ``G = SᵀKS``. It is a lower bound of
the log marginal likelihood for any ``S``, ``u`` and ``d`` and is maximised in all of
them and in the kernel's hyperparameters. ``Σ_jj = k(x_j, x_j) − ‖L⁻¹ SᵀK e_j‖²`` costs
``O(n i²)`` from ``K S``; ``K S`` is CaGP's one tiled pass.
"""

from __future__ import annotations

import torch

from ...kernels.kernel import Kernel
from ...likelihoods.base import Likelihood
from ...likelihoods.bernoulli import Bernoulli
from ...likelihoods.poisson import Poisson
from .._checks import check_inputs, check_likelihood_targets
from ..qsgp.estimator import expected_log_lik
from ..qsgp.exact import gauss_hermite
from .elbo import ActionsNotFullRankError, CaGPFactors
from .model import CaGP

__all__ = ["CaGPClassifier"]

_NO_NOISE = "a CaGPClassifier has no noise variance (its likelihood is not Gaussian)"

#: Gauss–Hermite points of the expected log-likelihood.
QUADRATURE_POINTS = 30


class CaGPClassifier(CaGP):
    """Computation-aware GP for a Bernoulli (or Poisson) likelihood, fitted by its ELBO.

    The variational family is the GP posterior of ``i`` pseudo-observations
    ``u = Sᵀf + η`` through learned block-sparse actions ``S`` (module docs); the
    hyperparameters, the actions' entries, ``u`` and the pseudo-noise ``d`` maximise
    the ELBO with Adam (:meth:`fit`, as :class:`~pnsolve.gp.CaGP`). Predictions:
    :meth:`posterior` (latent ``f``: ``.mean``, ``.var``) and :meth:`predict_proba`.

    Parameters
    ----------
    kernel
        A family of :mod:`pnsolve.kernels` or an expression of them (learned in place).
    num_actions
        ``i``, at most ``n``.
    likelihood
        ``pn.likelihoods.Bernoulli()`` (default; labels ``{0, 1}``) or
        ``pn.likelihoods.Poisson()`` (counts).
    blocks, backend, mean
        As for :class:`~pnsolve.gp.CaGP` (``mean``: constant prior mean of ``f``).
    """

    _has_math_var = False

    def __init__(
        self,
        kernel: Kernel,
        num_actions: int,
        *,
        likelihood: Likelihood | None = None,
        blocks: str = "random",
        backend: str = "auto",
        mean: float = 0.0,
    ) -> None:
        super().__init__(kernel, 1.0, num_actions, blocks=blocks, backend=backend, mean=mean)
        likelihood = Bernoulli() if likelihood is None else likelihood
        if not isinstance(likelihood, Bernoulli | Poisson):
            raise TypeError(
                "likelihood must be pn.likelihoods.Bernoulli or Poisson (one latent function; "
                f"use pn.gp.CaGP for a Gaussian one), got {type(likelihood).__name__}"
            )
        self.likelihood = likelihood
        #: pseudo-targets ``u`` ``(i,)`` and ``log d`` ``(i,)``, set by the first fit
        self.pseudo_targets: torch.Tensor | None = None
        self.log_pseudo_noise: torch.Tensor | None = None

    @property
    def noise(self) -> float:
        """Not defined: the likelihood is not Gaussian."""
        raise AttributeError(_NO_NOISE)

    @noise.setter
    def noise(self, value: float) -> None:
        raise AttributeError(_NO_NOISE)

    def system(self, X: torch.Tensor):
        """``K(X, X)`` (there is no noise term; kept for the fit record)."""
        return self.kernel.linop(X, backend=self.backend)

    @property
    def calibrated(self) -> bool:
        """``False``: a variational posterior whose actions are fitted to ``y``."""
        return False

    def _sources(self) -> dict[str, object]:
        return {
            "kernel": self.kernel,
            "likelihood": self.likelihood,
            "mean": self.mean,
            "actions": self.action_values,
            "pseudo_targets": self.pseudo_targets,
            "pseudo_noise": self.log_pseudo_noise,
        }

    def _check_data(self, X: object, y: object) -> tuple[torch.Tensor, torch.Tensor]:
        X = check_inputs(X, "X")
        y = check_likelihood_targets(y, X, self.likelihood).to(X.dtype)
        return X, y

    # ------------------------------------------------------- training protocol
    def place(self, X: torch.Tensor) -> None:
        """Nothing to move: its tensors are created on ``X``'s device by the first fit."""

    def hyperparameter_leaves(self) -> list[torch.Tensor]:
        """The kernel's raw parameters (there is no noise)."""
        return list(self.kernel.parameters())

    def variational_leaves(self) -> list[torch.Tensor]:
        """The actions' entries, the pseudo-targets ``u`` and ``log d``."""
        leaves = [self.action_values, self.pseudo_targets, self.log_pseudo_noise]
        return [t for t in leaves if t is not None]

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors a checkpoint holds besides the kernel's state."""
        tensors = {
            "action_values": self.action_values,
            "pseudo_targets": self.pseudo_targets,
            "log_pseudo_noise": self.log_pseudo_noise,
        }
        return {name: t for name, t in tensors.items() if t is not None}

    def initialise_actions(
        self, X: torch.Tensor, y: torch.Tensor, generator: torch.Generator
    ) -> None:
        """The block pattern and entries (as CaGP), then ``u = Sᵀỹ`` and ``d = ‖s_j‖²``.

        ``ỹ`` are the targets centred (labels ``±1`` for Bernoulli, ``log(1 + y)`` minus
        its mean for Poisson): the start is the regression posterior of ``ỹ`` with unit
        noise, seen through the actions.
        """
        super().initialise_actions(X, y, generator)
        assert self.pattern is not None and self.action_values is not None
        if isinstance(self.likelihood, Bernoulli):
            target = 2.0 * y - 1.0
        else:
            target = torch.log1p(y)
            target = target - target.mean()
        values = self.action_values
        self.pseudo_targets = self.pattern.t_matmul(values, target.unsqueeze(1)).squeeze(1)
        self.log_pseudo_noise = torch.log(self.pattern.gram_diagonal(values))

    # ---------------------------------------------------------------- objective
    def _evaluate(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, CaGPFactors]:
        values = self._check_actions_for(X)
        u, log_d = self.pseudo_targets, self.log_pseudo_noise
        assert self.pattern is not None and u is not None and log_d is not None
        return self._classification_elbo(X, y, values, u, log_d)

    def _classification_elbo(
        self,
        X: torch.Tensor,
        y: torch.Tensor,
        values: torch.Tensor,
        u: torch.Tensor,
        log_d: torch.Tensor,
    ) -> tuple[torch.Tensor, CaGPFactors]:
        """The ELBO (0-d, float64, differentiable) and ``(L, v)`` for prediction."""
        f64 = torch.float64
        assert self.pattern is not None
        KS, StKS = self.action_products(X, torch.zeros_like(y), values)[:2]
        KS = KS.to(f64)
        i = KS.shape[1]
        G = StKS.to(f64)
        G = 0.5 * (G + G.mT)
        G_hat = G + torch.diag(torch.exp(log_d.to(f64)))
        L, bad = torch.linalg.cholesky_ex(G_hat)
        if int(bad) != 0:
            raise ActionsNotFullRankError(
                f"SᵀKS + D (i = {i}) is not positive definite: a pseudo-noise underflowed or "
                "the actions are rank deficient; lower the rates"
            )
        Stmu = self.pattern.t_matmul(values.to(f64), torch.full_like(KS[:, :1], self.mean))
        v = torch.cholesky_solve((u.to(f64) - Stmu.squeeze(1)).unsqueeze(1), L).squeeze(1)
        mean = self.mean + KS @ v
        W = torch.linalg.solve_triangular(L, KS.mT, upper=False)
        var = (self.kernel.diag(X).to(f64) - W.square().sum(0)).clamp_min(0.0)
        nodes, weights = gauss_hermite(QUADRATURE_POINTS, f64, X.device)
        ell = expected_log_lik(self.likelihood, y.to(f64), mean, var, nodes, weights).sum()
        trace_G = torch.cholesky_solve(G, L).diagonal().sum()
        kl = 0.5 * (v @ (G @ v) + 2 * torch.log(L.diagonal()).sum() - log_d.to(f64).sum() - trace_G)
        return ell - kl, CaGPFactors(L.detach(), v.detach())

    # ---------------------------------------------------------------- queries
    def predict_proba(self, Xs: torch.Tensor) -> torch.Tensor:
        """``p(y = 1 | Xs)`` (Bernoulli) or the predictive mean count (Poisson), shape ``(t,)``.

        From the latent posterior's marginals by the likelihood's
        :meth:`~pnsolve.likelihoods.Likelihood.predict` (``"probit"`` approximation for
        the logit link, exact for the probit link).
        """
        post = self.posterior(Xs)
        return self.likelihood.predict(post.mean, post.var)
