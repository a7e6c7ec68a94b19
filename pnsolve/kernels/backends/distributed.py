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

from collections.abc import Callable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from ..base import StationaryKernel
from .auto import choose_backend
from .chunked import ChunkedBackend
from .dense import DenseBackend
from .keops import KeOpsBackend
from .tiling import DEFAULT_MAX_MEMORY

__all__ = [
    "DistributedBackend",
    "all_reduce_",
    "check_ranks_agree",
    "is_lead",
    "partition",
    "require_process_group",
]

T = TypeVar("T")
LOCAL_BACKENDS = ("auto", "dense", "chunked", "keops")


def require_process_group() -> tuple[int, int]:
    """``(rank, world size)`` of the initialised default group.

    Raises
    ------
    RuntimeError
        If torch.distributed is unavailable or its default process group is not
        initialised (the message says how to start one).
    """
    if not dist.is_available():
        raise RuntimeError('backend="distributed" needs torch.distributed, which this torch lacks')
    if not dist.is_initialized():
        raise RuntimeError(
            'backend="distributed" needs an initialised default process group: call '
            'torch.distributed.init_process_group("gloo" on CPUs, "nccl" on GPUs) in every '
            "process first (under torchrun: init_process_group(backend) reads its "
            "environment); a timeout= there bounds how long a rank waits for a failed one"
        )
    return dist.get_rank(), dist.get_world_size()


def is_lead(backend: str) -> bool:
    """Whether this process prints and writes files (all but ranks > 0 of ``"distributed"``)."""
    return backend != "distributed" or require_process_group()[0] == 0


def partition(n: int, world: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` row ranges of ``n`` rows over ``world`` ranks.

    Sizes differ by at most one (the first ``n mod world`` ranks get one more); ranks
    beyond ``n`` get empty ranges.
    """
    base, extra = divmod(n, world)
    bounds, start = [], 0
    for r in range(world):
        stop = start + base + (1 if r < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def collective(call: Callable[[], T], what: str) -> T:
    """Run a collective; a failure (a rank that died, a timeout) becomes one clear error."""
    try:
        return call()
    except RuntimeError as e:  # gloo/NCCL errors (DistBackendError is a RuntimeError)
        rank, world = dist.get_rank(), dist.get_world_size()
        raise RuntimeError(
            f'backend="distributed": {what} failed on rank {rank} of {world}: another rank '
            "failed, exited or disagreed, or the process group's timeout passed "
            f"({type(e).__name__}: {e})"
        ) from e


def all_reduce_(tensors: list[torch.Tensor]) -> None:
    """Sum each tensor over the ranks, in place, with one ``all_reduce`` of their concatenation."""
    if not tensors:
        return
    flat = torch.cat([t.reshape(-1) for t in tensors])
    collective(lambda: dist.all_reduce(flat), "all_reduce of a gradient")
    offset = 0
    for t in tensors:
        t.copy_(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()


def check_ranks_agree(kernel: StationaryKernel, X1: torch.Tensor, X2: torch.Tensor | None) -> None:
    """Refuse (on every rank) inputs or hyperparameters that differ between ranks.

    Compares a fixed-size fingerprint (shapes, sums, weighted sums of ``X1``, ``X2`` and
    the kernel's parameters) with one ``all_gather``; a mismatch raises ``ValueError``
    naming the argument and the ranks.
    """
    device = X1.device
    parts: list[tuple[str, torch.Tensor]] = [("X1", X1)]
    if X2 is not None:
        parts.append(("X2", X2))
    parts.append(("the kernel's hyperparameters", _params_vector(kernel, device)))
    prints = torch.stack([_fingerprint(t) for _, t in parts])  # (parts, 5)
    world = dist.get_world_size()
    gathered = [torch.empty_like(prints) for _ in range(world)]
    collective(lambda: dist.all_gather(gathered, prints), "checking that the ranks agree")
    for i, (name, _) in enumerate(parts):
        differ = [r for r in range(world) if not torch.equal(gathered[r][i], gathered[0][i])]
        if differ:
            raise ValueError(
                f'backend="distributed": ranks {differ} hold another {name} than rank 0 '
                "(every rank must pass the same inputs, kernel and right-hand sides)"
            )


def _params_vector(kernel: StationaryKernel, device: torch.device) -> torch.Tensor:
    ps = [
        p.detach().reshape(-1).to(device=device, dtype=torch.float64) for p in kernel.parameters()
    ]
    return torch.cat(ps) if ps else torch.zeros(0, dtype=torch.float64, device=device)


def _fingerprint(t: torch.Tensor) -> torch.Tensor:
    """Five float64 numbers that differ when ``t``'s shape or values do (almost surely)."""
    flat = t.detach().reshape(-1).to(torch.float64)
    w = torch.arange(1, flat.numel() + 1, dtype=torch.float64, device=flat.device)
    w = torch.sin(w)  # weights with no structure that reorderings could keep
    rows = float(t.shape[0]) if t.ndim else 1.0
    return torch.stack(
        [
            torch.tensor(rows, dtype=torch.float64, device=flat.device),
            torch.tensor(float(flat.numel()), dtype=torch.float64, device=flat.device),
            flat.sum(),
            (flat * flat).sum(),
            (flat * w).sum(),
        ]
    )


class DistributedBackend:
    """Products ``K(X1, X2) @ V`` with rows partitioned over the default process group.

    Parameters
    ----------
    kernel
        A stationary kernel (the same on every rank).
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
        kernel: StationaryKernel,
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
            name = choose_backend(max(1, rows.shape[0]), cols.shape[0], A.dtype, A.device)
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
            self.impl = KeOpsBackend(owner.kernel, rows, cols)

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
        ctx.save_for_backward(V)
        return backend.block(transposed).product(V)

    @staticmethod
    def backward(ctx: Any, G: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        backend: DistributedBackend = ctx.backend
        transposed: bool = ctx.transposed
        (V,) = ctx.saved_tensors
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
