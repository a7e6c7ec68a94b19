"""Exact GP regression by Cholesky: the reference every iterative method is checked against."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._core.precision import full_float32
from ..kernels.grid_interpolation import GridInterpolation
from ..kernels.kernel import Kernel
from ..linops.base import LinearOperator
from ..linops.closure import Closure
from ._checks import check_inputs, check_mean, check_model_kernel, check_noise, check_targets
from ._fitted import FitRecord, readout
from ._regression import RegressionGP
from .fit_state import FitChangedError, own_copy
from .love import LoveCache
from .posterior import GaussianPosterior

__all__ = ["SKI_DENSE_LIMIT", "ExactFitState", "ExactGP"]

#: Most training points for which :class:`ExactGP` forms a SKI kernel densely: its point
#: is to avoid the ``n × n`` matrix, so larger SKI models are fitted with ``IterGP``.
SKI_DENSE_LIMIT = 5000


@dataclass(frozen=True)
class ExactFitState(FitRecord):
    """What :meth:`ExactGP.fit` computed, and from what (never modified).

    The fields of every model's ``FitRecord`` (``provenance``, ``X``, ``y``, ``A``: here
    ``K̂ = L Lᵀ`` as an operator) and:

    Attributes
    ----------
    L
        Lower Cholesky factor of ``K̂``, shape ``(n, n)`` (``A`` is ``K̂ = L Lᵀ``).
    weights
        Representer weights ``K̂⁻¹ (y − μ)``, shape ``(n,)``.
    """

    L: torch.Tensor
    weights: torch.Tensor


class ExactGP(RegressionGP[ExactFitState]):
    """GP regression with a dense Cholesky factorisation of ``K̂ = K(X, X) + σ² I``.

    Parameters
    ----------
    kernel
        A :class:`~pnsolve.kernels.Kernel`: a stationary kernel (e.g.
        ``pn.kernels.RBF(...)``) or a SKI kernel (:class:`~pnsolve.kernels.GridInterpolation`,
        formed densely as the exact-SKI reference, for ``n ≤`` :data:`SKI_DENSE_LIMIT`).
    noise
        Observation-noise variance ``σ² > 0``.
    mean
        Constant prior mean ``μ``.

    Notes
    -----
    A query after the kernel's hyperparameters, ``noise`` or ``mean`` changed since
    :meth:`fit` (an optimiser step, ``k.lengthscale = …``, ``load_state_dict``) fits
    again on the same data first: answers always follow the current hyperparameters.
    Training data written in place since the fit are refused
    (:class:`~pnsolve.gp.fit_state.FitChangedError`).

    Costs ``O(n³)`` time and ``O(n²)`` memory: the reference for moderate ``n``. Fitting
    runs without autograd; for hyperparameter gradients use
    :meth:`log_marginal_likelihood` with ``X, y`` under autograd. ``fit`` binds
    data-derived kernel settings to the training inputs (:meth:`Kernel.bind
    <pnsolve.kernels.Kernel.bind>`: a SKI grid without ``grid_bounds`` is fixed to cover
    ``X``), so ``self.kernel`` is then that bound kernel (sharing the parameters).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> X = torch.linspace(0, 1, 20, dtype=torch.float64).unsqueeze(-1)
    >>> y = torch.sin(6 * X[:, 0])
    >>> gp = pn.gp.ExactGP(pn.kernels.RBF(lengthscale=0.3), noise=0.01).fit(X, y)
    >>> post = gp.posterior(X[:3])
    >>> post.mean.shape, post.var.shape
    (torch.Size([3]), torch.Size([3]))
    """

    def __init__(self, kernel: Kernel, noise: float, mean: float = 0.0) -> None:
        self.kernel = check_model_kernel(kernel)
        self.noise = check_noise(noise)
        self.mean = float(check_mean(mean))

    @full_float32
    def fit(self, X: torch.Tensor, y: torch.Tensor) -> ExactGP:
        """Factor ``K̂`` and compute the representer weights ``K̂⁻¹ (y − μ)``.

        Parameters
        ----------
        X
            Training inputs, shape ``(n, d)``.
        y
            Targets, shape ``(n,)``.

        Returns
        -------
        ExactGP
            ``self``.
        """
        X = check_inputs(X, "X")
        y = check_targets(y, X)
        X, y = own_copy(X), own_copy(y)  # the fit's own data: later writes do not reach it
        _check_dense_size(self.kernel, X.shape[0])
        self._bind_kernel(X)
        provenance = self._provenance(X, y)
        with torch.no_grad():
            K = self.kernel(X)
            K.diagonal().add_(self.noise)
            L = _cholesky(K)
            weights = torch.cholesky_solve((y - self.mean).unsqueeze(-1), L).squeeze(-1)
        self._store(ExactFitState(provenance, X, y, _cholesky_operator(L), L, weights))
        return self

    def _refit(self, record: ExactFitState) -> None:
        self.fit(record.X, record.y)

    L: torch.Tensor = readout("L")
    """Lower Cholesky factor of ``K̂`` of the current fit, shape ``(n, n)``."""

    weights: torch.Tensor = readout("weights")
    """Representer weights ``K̂⁻¹ (y − μ)`` of the current fit, shape ``(n,)``."""

    @full_float32
    def posterior(
        self,
        Xs: torch.Tensor,
        method: str = "exact",
        rank: int = 50,
        probe: torch.Tensor | None = None,
        cache: LoveCache | None = None,
    ) -> GaussianPosterior:
        """The posterior of ``f`` at test inputs ``Xs`` of shape ``(t, d)``.

        A query: the model is not modified (a LOVE cache built for this call is
        returned as ``posterior.love_cache``, not kept on the model), except that a
        model whose hyperparameters changed since :meth:`fit` fits again first.

        Parameters
        ----------
        Xs
            Test inputs, shape ``(t, d)``.
        method
            ``"exact"`` (Cholesky solves) or ``"love"`` (variances from a
            :class:`~pnsolve.gp.LoveCache` of ``K̂``; ``math_var`` is then the exact
            variance and ``comp_var`` LOVE's computational uncertainty, both ``≥ 0``;
            ``sample`` uses a second Lanczos of the same rank on the test covariance).
        rank
            Lanczos steps for ``method="love"`` when no ``cache`` is given (capped at
            ``n``, where the cache is exact).
        probe
            Lanczos probe for a new cache, shape ``(n,)``; default: ``k(X, Xs)``
            averaged over the test points (the paper's choice).
        cache
            A cache from :meth:`build_love_cache` (or an earlier posterior's
            ``love_cache``), reused across calls (then ``rank`` and ``probe`` are not
            used). Without it, each ``"love"`` call builds a cache for that call only
            (``rank + 1`` products with ``K̂``), returned as ``posterior.love_cache``.

        Returns
        -------
        GaussianPosterior
            ``mean`` ``(t,)``, ``var`` ``(t,)``, ``cov()`` ``(t, t)``, ``sample(...)``;
            for ``"love"`` a :class:`~pnsolve.gp.LovePosterior`, the belief posterior of
            the cache (:func:`~pnsolve.gp.love_posterior.love_posterior`) with
            ``love_cache`` and ``sample_root()``. ``calibrated`` is
            ``True`` for ``"exact"`` (no computational uncertainty) and for ``"love"``
            with the default probe (built from ``k(X, Xs)`` only); ``False`` for a given
            ``probe`` (declare it through :meth:`build_love_cache`).
        """
        record, Xs = self._query(Xs, method, "exact")
        if method == "love":
            return self._love_posterior(
                record, Xs, rank, probe, cache, math_var=lambda: self._exact_var(record, Xs)
            )
        with torch.no_grad():
            Kxs = self.kernel(Xs, record.X)  # (t, n)
            mean = self.mean + Kxs @ record.weights
            W = torch.linalg.solve_triangular(record.L, Kxs.mT, upper=False)  # (n, t)
            prior, explained = self.kernel.diag(Xs), (W * W).sum(0)

        def cov() -> torch.Tensor:
            with torch.no_grad():
                return self.kernel(Xs) - W.mT @ W

        post = GaussianPosterior(  # no computational part; rounding below 0 becomes 0
            mean, prior - explained, cov, calibrated=True, var_scale=prior.abs() + explained
        )
        return self._tie(post, record)

    def _weights(self, record: ExactFitState) -> torch.Tensor:
        return record.weights

    def _exact_var(self, record: ExactFitState, Xs: torch.Tensor) -> torch.Tensor:
        """Exact posterior variances by a triangular solve, shape ``(t,)``."""
        with torch.no_grad():
            W = torch.linalg.solve_triangular(record.L, self.kernel(record.X, Xs), upper=False)
            return self.kernel.diag(Xs) - (W * W).sum(0)

    @full_float32
    def log_marginal_likelihood(
        self,
        X: torch.Tensor | None = None,
        y: torch.Tensor | None = None,
        noise: float | torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``log p(y | X)`` (0-d tensor); differentiable w.r.t. the kernel's parameters.

        Parameters
        ----------
        X, y
            Data (default: the fitted data), shapes ``(n, d)`` and ``(n,)``. Recomputed
            under autograd, so gradients reach the kernel hyperparameters.
        noise
            Noise variance to use instead of ``self.noise``: a positive float or a 0-d
            tensor (gradients flow into it, e.g. ``log_noise.exp()`` when fitting).
        """
        if (X is None) != (y is None):
            raise ValueError("pass both X and y, or neither (then the fitted data are used)")
        if X is None:
            record = self._record
            if record is None:
                raise RuntimeError("call fit(X, y) first, or pass X and y")
            written = record.provenance.data_changes()
            if written:
                raise FitChangedError(
                    f"the training data ({', '.join(written)}) were modified in place "
                    "since fit: call fit(X, y) again, or pass X and y"
                )
            X, y = record.X, record.y  # the hyperparameters are read now: always current
        X = check_inputs(X, "X")
        y = check_targets(y, X)
        noise = self.noise if noise is None else check_noise(noise)
        n = X.shape[0]
        _check_dense_size(self.kernel, n)
        L = _cholesky(self.kernel(X) + noise * torch.eye(n, dtype=X.dtype, device=X.device))
        r = (y - self.mean).unsqueeze(-1)
        alpha = torch.cholesky_solve(r, L)
        return (
            -0.5 * (r * alpha).sum()
            - torch.log(torch.diagonal(L)).sum()
            - 0.5 * n * math.log(2 * math.pi)
        )


def _check_dense_size(kernel: Kernel, n: int) -> None:
    """Refuse the dense ``n × n`` SKI kernel above :data:`SKI_DENSE_LIMIT` points."""
    if isinstance(kernel, GridInterpolation) and n > SKI_DENSE_LIMIT:
        raise ValueError(
            f"ExactGP would form the dense {n} × {n} SKI kernel and factor it (limit "
            f"{SKI_DENSE_LIMIT} points): fit SKI models with pn.gp.IterGP, which solves "
            "W K_UU Wᵀ + σ²I by CG with FFT products, and use method='love' for "
            "constant-time predictive variances"
        )


def _cholesky(K: torch.Tensor) -> torch.Tensor:
    """The lower Cholesky factor of ``K̂ = K + noise·I``; raises if it is not positive definite."""
    L, info = torch.linalg.cholesky_ex(K)
    if int(info) != 0:
        raise ValueError(
            f"K + noise·I is not positive definite (Cholesky failed at column "
            f"{int(info) - 1}); increase noise"
        )
    return L


def _cholesky_operator(L: torch.Tensor) -> LinearOperator:
    """``K̂ = L Lᵀ`` as an operator (two triangular products, no second ``n × n`` copy)."""
    n = L.shape[0]
    return Closure(
        lambda V: L @ (L.mT @ V),
        (n, n),
        dtype=L.dtype,
        device=L.device,
        is_symmetric=True,
        is_psd=True,
    )
