"""Setting a QSGP model up: checked data, features and ``q``, quadrature, control variates.

A mixin of :class:`~pnsolve.gp.QSGP`: what its queries and its training loop
(:mod:`pnsolve.gp.qsgp.training`) call before estimating anything.
"""

from __future__ import annotations

import math

import torch

from ..._core import random as rnd
from ..._core.statefile import DigestCache
from ...kernels.kernel import Kernel
from ...kernels.random_features import RandomFourierFeatures
from ...likelihoods.base import Likelihood
from ...likelihoods.gaussian import Gaussian
from .._checks import check_inputs, check_likelihood_targets
from .covariance import VariationalCovariance
from .estimator import ControlVariates
from .exact import gauss_hermite
from .features import FeatureBlocks

__all__ = ["QSGPSetup"]


class QSGPSetup:
    """Set-up of a QSGP model (a mixin).

    Checked data, the drawn features and initial ``q``, the quadrature rule, the control
    variates and Proposition 1's initialisation. The model sets its configuration
    (``kernel``, ``likelihood``, ``m``, ranks, ...) and the state these methods fill
    (``features``, ``mean_weights``, ``cov``, ``log_noise``, ``cv``, ``cv_data``).
    """

    kernel: Kernel
    likelihood: Likelihood
    m: int
    covariance_kind: str
    rank: int
    control_variate_rank: int
    linear_control_variate: bool
    quadrature_points: int
    generator: torch.Generator
    features: FeatureBlocks | None
    mean_weights: torch.Tensor | None
    cov: VariationalCovariance | None
    log_noise: torch.Tensor | None
    cv: ControlVariates | None
    cv_data: str | None
    data_digest: DigestCache
    _rule: tuple[torch.Tensor, torch.Tensor] | None

    def check_data(self, X: object, y: object) -> tuple[torch.Tensor, torch.Tensor]:
        """Checked training data ``(X, y)``.

        ``X`` ``(n, d)`` as for queries; ``y`` ``(n,)``, values the likelihood accepts,
        cast to ``X``'s dtype.
        """
        X = self._check_inputs(X, "X")
        y = check_likelihood_targets(y, X, self.likelihood).to(X.dtype)
        return X, y

    def _check_inputs(self, X: object, name: str) -> torch.Tensor:
        """``X`` of shape ``(n, d)``, float32/64, finite, matching the model once built.

        NumPy arrays are converted (as for the other GP models); once the model is built,
        the number of columns, dtype and device must be the model's.
        """
        if self.features is None or self.mean_weights is None:
            return check_inputs(X, name)
        return check_inputs(X, name, self.features.rff.input_dim, like=self.mean_weights)

    def build(self, X: torch.Tensor) -> None:
        """Draw the features and initialise ``q`` (prior: ``μ = 0``, ``C = I``) once.

        ``X`` ``(n, d)`` fixes the input dimension, dtype and device; later calls do
        nothing.
        """
        if self.features is not None:
            return
        rff = RandomFourierFeatures(
            self.kernel, self.m, X.shape[1], generator=self.generator, dtype=X.dtype,
            device=X.device,
        )  # fmt: skip
        self.features = FeatureBlocks(rff)
        self.features.freeze()
        self.mean_weights = torch.zeros(self.m, dtype=X.dtype, device=X.device)
        self.cov = VariationalCovariance(
            self.m, self.covariance_kind, self.rank, dtype=X.dtype, device=X.device
        )
        noise = self.likelihood.noise_variance if isinstance(self.likelihood, Gaussian) else 1.0
        self.log_noise = torch.tensor(math.log(float(noise)), dtype=X.dtype, device=X.device)

    def quadrature(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gauss–Hermite rule ``(nodes, weights)`` in ``X``'s dtype/device (cached)."""
        rule = self._rule
        if rule is None or rule[0].dtype != X.dtype or rule[0].device != X.device:
            rule = self._rule = gauss_hermite(self.quadrature_points, X.dtype, X.device)
        return rule

    def control_variates_for(self, X: torch.Tensor, y: torch.Tensor) -> ControlVariates | None:
        """The control variates for the data ``(X, y)``: kept, or rebuilt for other data.

        Their support points are row indices of the data they were built on and their
        products (and F.2's ``Φᵀy``) belong to it, so other data (or the same rows in
        another order) gets a new set; reusing them would bias the estimate.
        """
        digest = self.data_digest(X, y)
        if self.cv is None or self.cv_data != digest:
            self.cv, self.cv_data = self.build_control_variates(X, y), digest
        return self.cv

    def build_control_variates(self, X: torch.Tensor, y: torch.Tensor) -> ControlVariates | None:
        """Support points and exact running products for the current ``q`` (``O(n̄ m)``)."""
        assert self.features is not None and self.cov is not None and self.mean_weights is not None
        nbar = min(self.control_variate_rank, X.shape[0])
        if nbar == 0 or not isinstance(self.likelihood, Gaussian):
            return None
        support = rnd.randperm(X.shape[0], generator=self.generator, device=X.device)[:nbar]
        R, Xp = self.cov.R, X[support]
        a = torch.zeros(nbar, dtype=X.dtype, device=X.device)
        A = torch.zeros(nbar, R, dtype=X.dtype, device=X.device)
        dense = self.cov.dense_columns()
        step = max(R, 2**22 // nbar)  # Φ⁰_p in column blocks: never the whole (n̄, m)
        for c0 in range(0, self.m, step):
            cols = torch.arange(c0, min(self.m, c0 + step), device=X.device)
            B = self.features.block(Xp, cols, frozen=True)
            a += B @ self.mean_weights[cols]
            A += B @ dense[cols]
        basis = self.features.block(Xp, torch.arange(R, device=X.device), frozen=True)
        cv = ControlVariates(support=support, a=a, A=A, basis_dense=basis)
        if self.linear_control_variate:
            b = torch.zeros(self.m, dtype=X.dtype, device=X.device)
            for sl, Phi in self.features.chunks(X, frozen=True):
                b += Phi.mT @ y[sl]
            cv.b, cv.beta = b, b @ self.mean_weights
        return cv

    def closed_form_diagonal(self, X: torch.Tensor, y: torch.Tensor) -> None:
        """Set the diagonal-only columns' ``c_rr`` to their optimum (Proposition 1).

        For a column ``c_r = c_rr e_r`` (``r ≥ R``) the ELBO is maximised at
        ``c_rr = sqrt(σ² / (φ_rᵀφ_r + σ² s_rr))`` (``s_rr = 1``), whatever the other
        parameters; this costs one pass over ``Φ`` (``O(n m)``), so it is an
        initialisation (``fit(..., closed_form_diagonal=True)``), not a per-step rule.
        Gaussian likelihood only.
        """
        if not isinstance(self.likelihood, Gaussian):
            raise TypeError("Proposition 1's closed form needs a Gaussian likelihood")
        X, y = self.check_data(X, y)
        self.build(X)
        assert self.features is not None and self.cov is not None and self.log_noise is not None
        R = self.cov.R
        col_sq = torch.zeros(self.m - R, dtype=X.dtype, device=X.device)
        with torch.no_grad():
            for _, Phi in self.features.chunks(X):
                col_sq += (Phi[:, R:] ** 2).sum(0)
            s2 = torch.exp(self.log_noise)
            self.cov.log_diag[R:] = 0.5 * torch.log(s2 / (col_sq + s2))
        self.cv = None  # the running products no longer match: rebuilt by the next fit
