"""``K̂(θ)`` and the surrogate gradient from one stored matrix (isotropic kernels, small ``n``).

For an isotropic stationary kernel ``k(x, x') = σ κ(‖x − x'‖² / ℓ²)`` the squared
distances ``D_ij = ‖x_i − x_j‖²`` do not depend on ``θ``. Stored once, they give at each
``θ`` the matrix ``K̂ = σ κ(D/ℓ²) + λ I`` and, for a bilinear surrogate
``S = Σ_c u_cᵀ K̂ w_c = Σ_ij G_ij K̂_ij`` (``G = U Wᵀ``), its log-space gradient in three
passes over ``n²`` entries:

* ``∂S/∂ log σ = Σ_ij G_ij K_ij``,
* ``∂S/∂ log ℓ = Σ_ij G_ij σ κ'(r²_ij) (−2 r²_ij)``, ``r² = D/ℓ²`` (``κ'`` by reverse-mode
  autograd through the elementwise profile only),
* ``∂S/∂ log λ = λ Σ_c u_cᵀ w_c``,

instead of re-forming ``K`` row block by row block inside an autograd graph (the
matrix-free path of :func:`~pnsolve.gp.mll_estimators._surrogate.accumulate_surrogate_gradient`),
which was 60 % of an SGLD iteration at ``n = 927``. Memory: four ``n × n`` arrays, so it
is used only where the kernel matrix is stored anyway (the ``"dense"`` backend).
"""

from __future__ import annotations

import torch

from ...kernels.base import StationaryKernel
from ...linops.dense import Dense
from .hyperparameters import LogHyperparameters

__all__ = ["DenseSurrogate"]


class DenseSurrogate:
    """Stored squared distances of ``X``; ``K̂(θ)`` and ``∇_θ S`` from them.

    Parameters
    ----------
    params
        Log-space hyperparameters of an isotropic kernel (``params.kernel.ard_dims`` is
        ``None``).
    X
        Inputs, shape ``(n, d)``.
    """

    def __init__(self, params: LogHyperparameters, X: torch.Tensor) -> None:
        kernel = params.kernel
        if params.generic or not isinstance(kernel, StationaryKernel) or kernel.ard_dims:
            raise ValueError("DenseSurrogate needs an RBF or Matérn kernel with one lengthscale")
        self._kernel: StationaryKernel = kernel
        self.params = params
        sq = (X * X).sum(-1, keepdim=True)
        self.D = torch.addmm(sq + sq.mT, X, X.mT, alpha=-2.0).clamp_min_(0.0)
        self.D.diagonal().zero_()  # exact zero self distances, as in the kernel matrix
        self._r2: torch.Tensor | None = None
        self._profile: torch.Tensor | None = None
        self._theta: torch.Tensor | None = None

    def system(self, theta: torch.Tensor) -> Dense:
        """``K̂(θ) = σ κ(D/ℓ²) + λ I`` as a stored matrix, shape ``(n, n)``."""
        params = self.params
        sigma = float(torch.exp(theta[0]))
        ell = float(params.lengthscale(theta))
        with torch.enable_grad():
            r2 = (self.D * (1.0 / ell**2)).requires_grad_(True)
            profile = self._kernel.profile(r2)
        K = profile.detach() * sigma
        K.diagonal().add_(params.noise_at(theta))
        self._r2, self._profile, self._theta = r2, profile, theta
        return Dense(K, is_symmetric=True, is_psd=True)

    def gradient(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """``∇_θ Σ_c left_cᵀ K̂(θ) right_c`` at the last :meth:`system`'s ``θ``, shape ``(p,)``.

        Parameters
        ----------
        left, right
            Shape ``(n, k)`` each.
        """
        if self._r2 is None or self._profile is None or self._theta is None:
            raise RuntimeError("call system(theta) before gradient()")
        theta, r2, profile = self._theta, self._r2, self._profile
        sigma = float(torch.exp(theta[0]))
        G = left @ right.mT
        (d_r2,) = torch.autograd.grad(profile, r2, G)  # G ∘ κ'(r²)
        d_log_ell = float((d_r2 * r2.detach()).sum()) * (-2.0 * sigma)
        d_log_sigma = float((G * profile.detach()).sum()) * sigma
        d_log_noise = float((left * right).sum()) * self.params.noise_at(theta)
        self._r2 = self._profile = None
        out = theta.new_zeros(self.params.dim, dtype=torch.float64)
        out[0], out[1], out[-1] = d_log_sigma, d_log_ell, d_log_noise
        if self.params.parametrization == "log_tau":
            out[1] = -0.5 * out[1]  # log τ = −log 2 − 2 log ℓ
        return out
