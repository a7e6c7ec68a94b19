"""Vector-Jacobian products of kernel products by recomputing them with autograd."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..kernel import Kernel

__all__ = ["recompute_vjp"]


def recompute_vjp(
    product: Callable[[torch.Tensor, torch.Tensor | None, torch.Tensor], torch.Tensor],
    kernel: Kernel,
    X1: torch.Tensor,
    X2: torch.Tensor | None,
    V: torch.Tensor,
    G: torch.Tensor,
    *,
    need_X1: bool,
    need_X2: bool,
) -> tuple[torch.Tensor | None, torch.Tensor | None, list[torch.Tensor]]:
    """Gradients of ``Σ G ⊙ product(X1, X2, V)`` for backends that differentiate themselves.

    ``product(x1, x2, v)`` is the backend's ``K(x1, x2) @ v`` built with autograd (dense
    matrix, KeOps reduction). Returns ``(grad_X1, grad_X2, grads)`` as
    :meth:`~pnsolve.kernels.backends.ChunkedBackend.vjp` does; ``V`` gets no gradient.
    """
    params = [p for p in kernel.parameters() if p.requires_grad]
    with torch.enable_grad():
        x1 = X1.detach().requires_grad_(need_X1)
        x2 = None if X2 is None else X2.detach().requires_grad_(need_X2)
        inputs = [t for t in (x1, x2) if t is not None and t.requires_grad] + params
        if not inputs:
            return None, None, []
        out = product(x1, x2, V.detach())
        grads = torch.autograd.grad(out, inputs, G, allow_unused=True)
    full = [torch.zeros_like(t) if g is None else g for t, g in zip(inputs, grads)]
    it = iter(full)
    grad_X1 = next(it) if x1.requires_grad else None
    grad_X2 = next(it) if x2 is not None and x2.requires_grad else None
    return grad_X1, grad_X2, list(it)
