"""Softmax (multinomial) likelihood for multi-class classification."""

from __future__ import annotations

import math

import torch

from .._core.validation import check_class_labels, check_int
from ..linops.base import LinearOperator
from ..linops.closure import Closure
from .base import Likelihood
from .softmax_hessian import SoftmaxHessian, SoftmaxHessianPinv

__all__ = ["Softmax"]


class Softmax(Likelihood):
    """``p(y = c | fᵢ) = softmax(fᵢ)_c`` with ``C`` latent functions; ``y ∈ {0, …, C−1}``.

    ``f`` has shape ``(n, C)``; the operators act on the **class-major** flat latent
    vector ``f.mT.reshape(-1)`` (entry ``c·n + i`` is ``f[i, c]``), length ``C·n``.

    ``log p = fᵢ[yᵢ] − logsumexp(fᵢ)``, ``g = onehot(y) − p``, and
    ``W = blkdiag_i(diag(pᵢ) − pᵢpᵢᵀ)`` (:class:`SoftmaxHessian`, rank ``C − 1`` per
    block, null vector ``1``). :meth:`noise` returns the closed-form pseudo-inverse
    ``W⁺ = blkdiag_i(P Dᵢ⁻¹ P)``, ``P = I − 11ᵀ/C`` (:class:`SoftmaxHessianPinv`, with
    the derivation). Both apply in ``O(n C)``.

    Parameters
    ----------
    num_classes
        ``C ≥ 2``.

    Notes
    -----
    :meth:`predict` takes latent marginal means and variances of shape ``(t, C)``
    (classes independent a posteriori, marginally) and returns class probabilities
    ``(t, C)`` whose rows sum to one: ``method="probit"`` is the MacKay-style
    approximation ``softmax(m / √(1 + πv/8))`` (per class), ``method="mc"`` averages
    ``softmax(f)`` over draws ``f ~ N(m, diag v)``.
    """

    analytic_methods = ("probit",)

    def __init__(self, num_classes: int) -> None:
        self._num_classes = check_int(num_classes, "num_classes", minimum=2)

    @property
    def num_latent(self) -> int:  # type: ignore[override]
        """``C``: one latent function per class."""
        return self._num_classes

    @property
    def num_classes(self) -> int:
        """``C``."""
        return self._num_classes

    def __repr__(self) -> str:
        return f"Softmax(num_classes={self.num_latent})"

    def latent_projector(self, n: int, dtype: torch.dtype, device: torch.device) -> LinearOperator:
        """``P = blkdiag_i(I − 11ᵀ/C)`` on the class-major latent vector (``O(nC)``)."""
        C = self._num_classes

        def matmat(X: torch.Tensor) -> torch.Tensor:
            B = X.reshape(C, n, X.shape[-1])
            return (B - B.mean(0, keepdim=True)).reshape(C * n, X.shape[-1])

        return Closure(
            matmat, (C * n, C * n), dtype=dtype, device=device, is_symmetric=True, is_psd=True
        )

    def check_targets(self, y: object) -> torch.Tensor:
        """Class indices in ``{0, …, C−1}`` (integer or integral floating), returned int64."""
        return check_class_labels(y, self.num_latent, "y")

    def _log_likelihood(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(f, dim=1).gather(1, y.unsqueeze(1)).squeeze(1)

    def _gradient(self, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        onehot = torch.nn.functional.one_hot(y, self.num_latent).to(f.dtype)
        return onehot - torch.softmax(f, dim=1)

    def _hessian(self, f: torch.Tensor, y: torch.Tensor) -> SoftmaxHessian:
        return SoftmaxHessian._from_softmax(torch.softmax(f, dim=1))

    def _noise(self, f: torch.Tensor, y: torch.Tensor) -> SoftmaxHessianPinv:
        return SoftmaxHessianPinv._from_softmax(torch.softmax(f, dim=1))

    def _predict_analytic(self, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        return torch.softmax(mean / torch.sqrt(1 + math.pi / 8 * var), dim=-1)

    def _response(self, f: torch.Tensor) -> torch.Tensor:
        return torch.softmax(f, dim=-1)
