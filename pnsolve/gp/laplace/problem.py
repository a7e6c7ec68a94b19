"""The fixed data of a Laplace fit: likelihood, targets and the prior operators.

For the softmax the Newton regressions run on ``P K P`` with ``P`` the per-point
projector off the all-ones direction (the only directions the likelihood informs), plus
``c (I − P)`` (``c`` = the prior variance) on the complement, where ``P K P + W⁺`` is
singular: identical on range ``P``, and it lets the solver's metric see rounding errors
that leave range ``P`` instead of letting them grow unseen.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...kernels.kernel import Kernel
from ...kernels.kernel_matrix import KernelMatrix
from ...likelihoods.base import Likelihood
from ...linops.base import LinearOperator
from ...linops.closure import Closure
from ...linops.repeated_block import RepeatedBlockDiagonal
from .._checks import check_inputs, check_likelihood_targets

__all__ = ["LaplaceProblem", "laplace_problem", "latent_kernel"]


@dataclass(frozen=True)
class LaplaceProblem:
    """Inputs and operators of one Laplace fit, fixed for the whole Newton loop.

    Attributes
    ----------
    likelihood
        The observation model.
    X
        Training inputs, shape ``(n, d)``.
    y
        Checked targets, shape ``(n,)``.
    K
        Prior operator ``I_C ⊗ k(X, X)`` on the class-major latent vector, shape ``(N, N)``
        with ``N = C n``.
    projector
        ``P`` onto the latent directions the likelihood informs (``None``: all of them).
    K_informed
        ``K`` or, with a projector, ``P K P``: the fixed part of every Newton system and
        the operator the Krylov buffer records images of.
    complement
        ``c (I − P)`` with ``c`` the prior variance, or ``None`` without a projector.
    mean
        Constant prior mean ``μ`` of every latent function.
    """

    likelihood: Likelihood
    X: torch.Tensor
    y: torch.Tensor
    K: LinearOperator
    projector: LinearOperator | None
    K_informed: LinearOperator
    complement: LinearOperator | None
    mean: float

    @property
    def size(self) -> int:
        """Length ``N = C n`` of the latent vector."""
        return self.K.shape[0]


def latent_kernel(
    kernel: Kernel,
    X1: torch.Tensor,
    X2: torch.Tensor | None,
    num_latent: int,
    backend: str,
) -> LinearOperator:
    """``I_C ⊗ k(X1, X2)`` on class-major latent vectors, shape ``(C t₁, C t₂)``.

    ``X2 = None`` gives the symmetric prior operator ``I_C ⊗ k(X1, X1)``.
    """
    K = (
        KernelMatrix(kernel, X1, backend=backend)
        if X2 is None
        else KernelMatrix(kernel, X1, X2, backend=backend)
    )
    return K if num_latent == 1 else RepeatedBlockDiagonal(K, num_latent)


def laplace_problem(
    kernel: Kernel,
    likelihood: Likelihood,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    K: LinearOperator | None = None,
    mean: float = 0.0,
    backend: str = "auto",
) -> LaplaceProblem:
    """Check the training data and build the operators of a Laplace fit.

    Parameters
    ----------
    kernel
        Prior covariance of each latent function.
    likelihood
        The observation model.
    X
        Training inputs, shape ``(n, d)`` (tensor or NumPy array).
    y
        Targets, shape ``(n,)`` (checked by the likelihood).
    K
        Optional prior operator, shape ``(C n, C n)``, instead of ``I_C ⊗ k(X, X)``.
    mean
        Constant prior mean ``μ``.
    backend
        Kernel-matrix backend.

    Returns
    -------
    LaplaceProblem
        The checked inputs and operators.

    Raises
    ------
    TypeError, ValueError
        Naming ``X``, ``y`` or ``K``.
    """
    X = check_inputs(X, "X")
    y = check_likelihood_targets(y, X, likelihood)
    C = likelihood.num_latent
    Kop = latent_kernel(kernel, X, None, C, backend) if K is None else _check_prior(K, X, C)
    P = likelihood.latent_projector(X.shape[0], X.dtype, X.device)
    if P is None:
        return LaplaceProblem(likelihood, X, y, Kop, None, Kop, None, float(mean))
    c = float(kernel.diag(X[:1]).detach()[0])
    return LaplaceProblem(
        likelihood, X, y, Kop, P, _sandwich(P, Kop), _complement(P, c), float(mean)
    )


def _sandwich(P: LinearOperator, K: LinearOperator) -> LinearOperator:
    """``P K P`` for a symmetric projector ``P`` (one product with ``K`` per product)."""
    return Closure(
        lambda V: P @ (K @ (P @ V)),
        K.shape,
        dtype=K.dtype,
        device=K.device,
        is_symmetric=True,
        is_psd=True,
    )


def _complement(P: LinearOperator, c: float) -> LinearOperator:
    """``c (I − P)`` for a symmetric projector ``P`` (no product with ``K``)."""
    return Closure(
        lambda V: c * (V - P @ V),
        P.shape,
        dtype=P.dtype,
        device=P.device,
        is_symmetric=True,
        is_psd=True,
    )


def _check_prior(K: object, X: torch.Tensor, C: int) -> LinearOperator:
    if not isinstance(K, LinearOperator):
        raise TypeError(f"K must be a LinearOperator, got {type(K).__name__}")
    N = C * X.shape[0]
    if K.shape != (N, N):
        raise ValueError(f"K must have shape ({N}, {N}), got {tuple(K.shape)}")
    if K.dtype != X.dtype:
        raise TypeError(f"K must have dtype {X.dtype}, got {K.dtype}")
    return K
