"""GPyTorch models made equal to pnsolve's (the LOVE peers of the benchmarks).

An ``ExactGP`` with ``ZeroMean`` and ``GaussianLikelihood`` in eval mode, in the data's
dtype, with pnsolve's RBF-ARD lengthscales, outputscale and noise: :func:`exact_model`
(``ScaleKernel(RBFKernel)``; ``bench_love.py``) and :func:`ski_model`
(``ScaleKernel(GridInterpolationKernel(RBFKernel))`` on pnsolve's grid;
``bench_ski_love.py``, ``bench_love_tables.py``); :func:`love` predicts with
``fast_pred_var``. For the SKI model GPyTorch 1.15.2 needs three adjustments for the
kernels to agree to rounding level:

(a) ``create_grid`` puts the m points on ``[a − Δ, b + Δ]``, ``Δ = (b − a)/(m − 2)``
    (spacing ``(b − a) m / ((m − 1)(m − 2))``, not Δ): it gets the bounds
    ``(lo − h/m, hi + h/m)``, which reproduce pnsolve's points ``lo − h, …, hi + h``
    (``h = (hi − lo)/(m − 3)``), and its float32-built grid is replaced by the float64
    one (``update_grid``);
(b) ``GridKernel`` builds ``K_UU = Kron(K_{d−1}, …, K_0)`` (a "legacy" reversal) while
    its interpolation indices run with dimension 0 slowest, so each dimension's factor
    lands on another axis; with equal grid sizes, lengthscales
    ``ℓ'_j = ℓ_{d−1−j} h_j / h_{d−1−j}`` restore pnsolve's kernel;
(c) in the ``GridInterpolationKernel(ScaleKernel(...))`` nesting the outputscale is
    applied once per dimension (``s^d``), so the ``ScaleKernel`` goes outside.

Its LOVE (``fast_pred_var``) starts Lanczos from ``num_probe_vectors`` (default 1)
*random* columns drawn with torch's global generator: :func:`love` seeds it, so a run
is repeatable.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

import pnsolve as pn


def _exact_gp(
    covar_module: Any, X: torch.Tensor, y: torch.Tensor, kernel: pn.kernels.RBF, noise: float
) -> Any:
    """``ExactGP(ZeroMean, ScaleKernel(covar_module), GaussianLikelihood)`` at pnsolve's
    outputscale and noise, in ``X``'s dtype, eval mode (the lengthscales are the caller's).
    """
    import gpytorch

    class Model(gpytorch.models.ExactGP):
        def __init__(self, lik: Any) -> None:
            super().__init__(X, y, lik)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(covar_module)

        def forward(self, x: torch.Tensor) -> Any:
            return gpytorch.distributions.MultivariateNormal(
                self.mean_module(x), self.covar_module(x)
            )

    lik = gpytorch.likelihoods.GaussianLikelihood(
        noise_constraint=gpytorch.constraints.GreaterThan(1e-10)
    ).to(X.dtype)
    model = Model(lik).to(X.dtype)
    model.covar_module.outputscale = torch.tensor(float(kernel.outputscale.detach()), dtype=X.dtype)
    lik.noise = torch.tensor(noise, dtype=X.dtype)
    model.eval()
    lik.eval()
    return model


def exact_model(X: torch.Tensor, y: torch.Tensor, kernel: pn.kernels.RBF, noise: float) -> Any:
    """GPyTorch ``ExactGP`` with pnsolve's RBF-ARD kernel and noise (eval mode)."""
    import gpytorch

    model = _exact_gp(gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]), X, y, kernel, noise)
    ls = kernel.lengthscale.detach().reshape(-1).expand(X.shape[1]).clone()
    model.covar_module.base_kernel.lengthscale = ls.to(X.dtype)
    return model


def ski_model(
    X: torch.Tensor,
    y: torch.Tensor,
    kernel: pn.kernels.RBF,
    noise: float,
    grid: Any,
    bounds: Sequence[tuple[float, float]],
) -> tuple[Any, Callable[[torch.Tensor], torch.Tensor]]:
    """GPyTorch SKI ``ExactGP`` equal to pnsolve's (grid, RBF-ARD kernel, noise).

    Parameters
    ----------
    X, y
        Training inputs ``(n, d)`` and targets ``(n,)``, float64.
    kernel, noise
        pnsolve's base kernel and noise variance.
    grid
        pnsolve's grid (``cache.grid.grid``), equal sizes per dimension.
    bounds
        The grid's interior bounds (``GridInterpolation``'s ``grid_bounds``).

    Returns
    -------
    (model, K)
        The model in eval mode, and ``K(A)``: its dense SKI kernel matrix at ``A``.
    """
    import gpytorch

    dtype = X.dtype
    d = X.shape[1]
    m = grid.sizes[0]
    if len(set(grid.sizes)) != 1:
        raise ValueError("the gpytorch workaround needs equal grid sizes per dimension")
    h = grid.spacing
    gb = [(lo - h[j] / m, hi + h[j] / m) for j, (lo, hi) in enumerate(bounds)]
    ours = [grid.lower[j] + h[j] * torch.arange(m, dtype=dtype) for j in range(d)]
    ls = kernel.lengthscale.detach().reshape(-1).expand(d)
    ls_g = torch.tensor([float(ls[d - 1 - j]) * h[j] / h[d - 1 - j] for j in range(d)], dtype=dtype)

    inner = gpytorch.kernels.GridInterpolationKernel(
        gpytorch.kernels.RBFKernel(ard_num_dims=d), grid_size=m, num_dims=d, grid_bounds=gb
    )
    model = _exact_gp(inner, X, y, kernel, noise)
    inner.update_grid(ours)  # its create_grid ran in float32
    inner.base_kernel.lengthscale = ls_g

    def K(A: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # linear_operator's sparse-invariant notice
            return model.covar_module(A).to_dense()

    return model, K


def love(
    model: Any, Xs: torch.Tensor, rank: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """GPyTorch's predictive mean and LOVE variances (``fast_pred_var``) at ``Xs``.

    The first call builds its cache (its probe drawn after ``torch.manual_seed(seed)``);
    later calls reuse it.
    """
    import gpytorch

    if model.prediction_strategy is None:
        torch.manual_seed(seed)  # GPyTorch draws its probe column from the global generator
    with (
        torch.no_grad(),
        gpytorch.settings.fast_pred_var(),
        gpytorch.settings.max_root_decomposition_size(rank),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        out = model(Xs)
        return out.mean, out.variance
