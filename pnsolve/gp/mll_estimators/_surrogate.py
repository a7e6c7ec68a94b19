"""Matrix-free gradient of a bilinear surrogate ``Σ_c u_cᵀ K̂(θ) w_c`` (row block by row block).

Both stochastic estimators write their gradient estimate as the gradient of

    S(θ) = Σ_c u_cᵀ K̂(θ) w_c = Σ_ij G_ij K̂_ij(θ),   G = U Wᵀ,   K̂ = K(X, X; θ) + σ² I,

with ``U`` and ``W`` detached ``(n, k)`` blocks built from the solver's solutions. The
kernel part is differentiated by the kernel's
:meth:`~pnsolve.kernels.Kernel.bilinear_backward`: one row block ``K(X_R, X)`` at a time
for stationary kernels (memory ``O(rows · n)``), through the grid for SKI kernels; no
``n × n`` graph ever exists. The noise part is ``σ² Σ_c u_cᵀ w_c``.
"""

from __future__ import annotations

import torch

from ...kernels.backends.collectives import all_reduce_, partition, require_process_group
from ...kernels.base import StationaryKernel
from ...kernels.kernel import Kernel
from ._problem import Problem

__all__ = [
    "DEFAULT_CHUNK_ENTRIES",
    "accumulate_probe_gradient",
    "accumulate_surrogate_gradient",
    "chunk_rows_for",
]

#: Entries of one differentiable row block ``K(X_R, X)`` by default (2²¹: 16 MiB in
#: float64 per temporary; autograd keeps a handful of them per block).
DEFAULT_CHUNK_ENTRIES = 2**21


def chunk_rows_for(n: int, chunk_rows: int | None) -> int:
    """Rows per block: ``chunk_rows`` if given, else ``DEFAULT_CHUNK_ENTRIES // n`` (≥ 1)."""
    if chunk_rows is not None:
        return min(chunk_rows, n)
    return max(1, min(n, DEFAULT_CHUNK_ENTRIES // max(n, 1)))


def accumulate_surrogate_gradient(
    kernel: Kernel,
    X: torch.Tensor,
    noise: float | torch.Tensor,
    U: torch.Tensor,
    W: torch.Tensor,
    *,
    chunk_rows: int | None = None,
    distributed: bool = False,
) -> None:
    """Add ``∇ Σ_c U[:, c]ᵀ (K(X, X) + noise · I) W[:, c]`` to the ``.grad`` of the leaves.

    Parameters
    ----------
    kernel
        The kernel; its parameters (and ``X`` if it requires grad, for stationary
        kernels) receive gradients.
    X
        Inputs, shape ``(n, d)``.
    noise
        Noise variance: a float (no gradient) or a 0-d tensor; if it requires grad, its
        coefficient ``Σ_c U[:, c]ᵀ W[:, c]`` is back-propagated through it once, with
        ``retain_graph=True`` so the caller may reuse the graph of ``noise``.
    U, W
        Detached blocks of shape ``(n, k)``.
    chunk_rows
        Rows per differentiable block (default: :func:`chunk_rows_for`).
    distributed
        Each rank of torch.distributed's default group differentiates its share of the
        rows (as the ``"distributed"`` kernel backend partitions them) and one
        ``all_reduce`` sums the gradients: every rank gets the full gradient (stationary
        kernels).
    """
    U, W = U.detach(), W.detach()
    wants_kernel = X.requires_grad or any(p.requires_grad for p in kernel.parameters())
    rows = chunk_rows_for(X.shape[0], chunk_rows)
    if wants_kernel and distributed:
        if not isinstance(kernel, StationaryKernel):
            raise TypeError(
                "distributed gradients need a stationary kernel (RBF, Matern), got "
                f"{type(kernel).__name__}"
            )
        rank, world = require_process_group()
        span = partition(X.shape[0], world)[rank]
        kernel.bilinear_backward(X, U, W, rows=rows, row_range=span, reduce=all_reduce_)
    elif wants_kernel:
        kernel.bilinear_backward(X, U, W, rows=rows)
    if isinstance(noise, torch.Tensor) and noise.requires_grad:
        coefficient = (U * W).sum().to(device=noise.device, dtype=noise.dtype)
        torch.autograd.backward(noise, coefficient, retain_graph=True)


def accumulate_probe_gradient(
    problem: Problem,
    V: torch.Tensor,
    W: torch.Tensor,
    *,
    chunk_rows: int | None,
    distributed: bool = False,
) -> None:
    """Add the stochastic estimators' ``∇ [−½ v_yᵀ K̂ v_y + ½ (1/s) Σ_j v_jᵀ K̂ w_j]``.

    ``V = [v_y, v_1, …, v_s]`` are the solutions and ``W = [v_y, w_1, …, w_s]`` the
    vectors they are paired with (the probes ``z_j`` for the standard estimator, the
    solutions ``ẑ_j`` themselves for the pathwise one), both ``(n, 1 + s)``.
    """
    s = V.shape[1] - 1
    U = torch.cat([-0.5 * V[:, :1], (0.5 / s) * V[:, 1:]], dim=1)
    kernel, X, noise, _ = problem
    accumulate_surrogate_gradient(
        kernel, X, noise, U, W, chunk_rows=chunk_rows, distributed=distributed
    )
