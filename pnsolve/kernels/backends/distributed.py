"""The ``"distributed"`` backend: rows of ``K`` over the ranks of torch.distributed's default group.

Every rank holds the inputs, the right-hand side ``V`` and the result (replicated);
rank ``r`` owns a contiguous block of about ``n1 / P`` output rows and computes
``K(X1[rows], X2) @ V`` with the best local backend (``"dense"`` while its block fits
32 MiB, ``"keops"`` on CUDA, ``"chunked"`` otherwise). The blocks are assembled with
one ``all_gather`` (gloo on CPUs, NCCL on GPUs); a backward pass sums the ranks'
parameter and input gradients with one ``all_reduce``. So every algorithm that only
multiplies with the operator runs unchanged on every rank and takes identical steps:
the result of each product is the same tensor everywhere.

Memory per rank: the inputs ``(n1 + n2) d``, ``V`` and the result ``(n · k)``, the
gathered blocks ``P ⌈n1 / P⌉ k`` and the local backend's workspace (chunked: its
tiles; dense: the ``⌈n1 / P⌉ × n2`` block). Communication per product: each rank
receives ``(P − 1) ⌈n1 / P⌉ k`` numbers.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.autograd.function import once_differentiable

from ..kernel import Kernel
from .auto import choose_backend
from .chunked import ChunkedBackend
from .collectives import all_reduce_, collective, partition, require_process_group
from .dense import DenseBackend
from .keops import KeOpsBackend
from .rank_agreement import check_ranks_agree
from .tiling import DEFAULT_MAX_MEMORY

__all__ = ["LOCAL_BACKENDS", "DistributedBackend"]

LOCAL_BACKENDS = ("auto", "dense", "chunked", "keops")


class DistributedBackend:
    """Products ``K(X1, X2) @ V`` with rows partitioned over the default process group.

    Parameters
    ----------
    kernel
        A matrix-free kernel (the same on every rank).
    X1, X2
        Inputs (the same on every rank), ``X2 = None`` meaning ``X1``.
    local
        The backend of each rank's row block: ``"auto"`` (dense while the block fits
        32 MiB, KeOps on CUDA, chunked otherwise), ``"dense"``, ``"chunked"``, ``"keops"``.
    max_memory, tile
        Passed to a chunked local backend.

    Raises
    ------
    RuntimeError
        Without an initialised default process group.
    ValueError
        If the ranks hold different inputs or hyperparameters, or for an unknown ``local``.
    """

    name = "distributed"

    def __init__(
        self,
        kernel: Kernel,
        X1: torch.Tensor,
        X2: torch.Tensor | None,
        *,
        local: str = "auto",
        max_memory: int = DEFAULT_MAX_MEMORY,
        tile: tuple[int, int] | None = None,
    ) -> None:
        self.rank, self.world = require_process_group()
        if local not in LOCAL_BACKENDS:
            raise ValueError(f"local must be one of {LOCAL_BACKENDS}, got {local!r}")
        check_ranks_agree(kernel, X1, X2)
        self.kernel, self.X1, self.X2 = kernel, X1, X2
        self._local, self._max_memory, self._tile = local, max_memory, tile
        self._forward = _Block(self, X1, X2)
        self._transposed: _Block | None = None  # K(X2, X1)'s blocks, built on first use
        #: The backend of this rank's row block.
        self.local_backend: str = self._forward.backend_name

    # ----------------------------------------------------------------- products
    def matmat(self, V: torch.Tensor) -> torch.Tensor:
        """``K(X1, X2) @ V`` for ``V`` of shape ``(n2, k)``, the same on every rank."""
        return self._product(False, V)

    def rmatmat(self, V: torch.Tensor) -> torch.Tensor:
        """``K(X1, X2)ᵀ @ V = K(X2, X1) @ V`` for ``V`` of shape ``(n1, k)``."""
        return self._product(self.X2 is not None, V)

    def block(self, transposed: bool) -> _Block:
        """The row blocks of ``K(X1, X2)`` (or of ``K(X2, X1)`` if ``transposed``)."""
        if not transposed:
            return self._forward
        if self._transposed is None:
            assert self.X2 is not None
            self._transposed = _Block(self, self.X2, self.X1)
        return self._transposed

    def _product(self, transposed: bool, V: torch.Tensor) -> torch.Tensor:
        params = [p for p in self.kernel.parameters() if p.requires_grad]
        tensors = [self.X1, V, *params] + ([] if self.X2 is None else [self.X2])
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return _DistributedMatmul.apply(self, transposed, self.X1, self.X2, V, *params)
        return self.block(transposed).product(V)


class _Block:
    """One rank's rows of ``K(A, B)`` (``B = None``: ``K(A, A)``) and their assembly."""

    def __init__(self, owner: DistributedBackend, A: torch.Tensor, B: torch.Tensor | None) -> None:
        self.owner = owner
        self.bounds = partition(A.shape[0], owner.world)
        self.start, self.stop = self.bounds[owner.rank]
        self.rows = max(b - a for a, b in self.bounds)  # the padded block height
        cols = A if B is None else B
        rows = A[self.start : self.stop]
        offset = self.start if B is None else None  # a row block of a symmetric matrix
        name = owner._local
        if name == "auto":
            name = choose_backend(
                max(1, rows.shape[0]), cols.shape[0], A.dtype, A.device,
                keops=owner.kernel.has_keops_formula,
            )  # fmt: skip
        self.backend_name = name
        self.impl: Any
        if name == "dense":
            self.impl = DenseBackend(owner.kernel, rows, cols, self_offset=offset)
        elif name == "chunked":
            self.impl = ChunkedBackend(
                owner.kernel, rows, cols, self_offset=offset, max_memory=owner._max_memory,
                tile=owner._tile,
            )  # fmt: skip
        else:  # KeOps computes coincident points' distances as exact zeros itself
            self.impl = KeOpsBackend(owner.kernel, rows, cols, self_offset=offset)

    @torch.no_grad()
    def product(self, V: torch.Tensor) -> torch.Tensor:
        """``K(A, B) @ V`` assembled from every rank's rows (no autograd)."""
        if self.stop > self.start:
            local = self.impl.matmat(V)
        else:
            local = V.new_zeros(0, V.shape[1])
        return self.gather(local)

    def gather(self, local: torch.Tensor) -> torch.Tensor:
        """Concatenate the ranks' row blocks (padded to one height for ``all_gather``)."""
        k = local.shape[1]
        padded = local.new_zeros(self.rows, k)
        padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in range(self.owner.world)]
        collective(lambda: dist.all_gather(parts, padded), "all_gather of a kernel product")
        return torch.cat([p[: b - a] for p, (a, b) in zip(parts, self.bounds)])


class _DistributedMatmul(torch.autograd.Function):
    """``K(X1, X2; θ) @ V`` (or its transpose) over the ranks, with a distributed backward."""

    @staticmethod
    def forward(
        ctx: Any,
        backend: DistributedBackend,
        transposed: bool,
        X1: torch.Tensor,
        X2: torch.Tensor | None,
        V: torch.Tensor,
        *params: torch.Tensor,
    ) -> torch.Tensor:
        ctx.backend, ctx.transposed = backend, transposed
        # saved (not only read from the backend later) so that an in-place change
        # between forward and backward is an autograd error, not a wrong gradient
        ctx.save_for_backward(X1, X2, V, *params)
        return backend.block(transposed).product(V)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, G: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        backend: DistributedBackend = ctx.backend
        transposed: bool = ctx.transposed
        V = ctx.saved_tensors[2]  # unpacking checks every saved tensor's version
        need = ctx.needs_input_grad  # (backend, transposed, X1, X2, V, *params)
        X1, X2 = backend.X1, backend.X2
        G = G.contiguous()
        # ∂/∂V: Kᵀ G, the product in the other orientation (itself distributed)
        grad_V = None
        if need[4]:
            grad_V = backend.block(X2 is not None and not transposed).product(G)
        # ∂/∂(X, θ): this rank's rows of K(A, B), then one all_reduce of everything
        block = backend.block(transposed)
        sym = X2 is None
        A, B = (X1, X2) if not transposed else (X2, X1)
        need_A = bool(need[2] if not transposed else need[3])
        need_B = need_A if sym else bool(need[3] if not transposed else need[2])
        n_params = len(need) - 5
        if not (need_A or need_B or any(need[5:])):
            return (None, None, None, None, grad_V, *([None] * n_params))
        assert A is not None
        grad_A = torch.zeros_like(A) if need_A else None
        grad_B = torch.zeros_like(B) if need_B and B is not None else None
        grad_p = [torch.zeros_like(p) for p in backend.kernel.parameters() if p.requires_grad]
        if block.stop > block.start:
            g_rows, g_cols, g_params = block.impl.vjp(
                V, G[block.start : block.stop], need_X1=need_A, need_X2=need_B
            )
            if g_rows is not None and grad_A is not None:
                grad_A[block.start : block.stop] += g_rows
            cols_acc = grad_A if sym else grad_B
            if g_cols is not None and cols_acc is not None:
                cols_acc += g_cols
            for acc, g in zip(grad_p, g_params):
                acc += g
        all_reduce_([t for t in (grad_A, grad_B) if t is not None] + grad_p)
        grad_X1, grad_X2 = (grad_A, grad_B) if not transposed else (grad_B, grad_A)
        return (None, None, grad_X1, grad_X2, grad_V, *grad_p)
