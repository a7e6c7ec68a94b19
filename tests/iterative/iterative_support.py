"""Helpers of the kernel-system solver tests: small systems, exact references, counters."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

import pnsolve as pn
from pnsolve.iterative import (
    AlternatingProjections,
    ConjugateGradients,
    KernelSystem,
    StochasticGradientDescent,
)

F64 = torch.float64

#: Kernels the solvers are checked on (name → factory of a kernel for ``d`` inputs).
KERNELS: dict[str, Callable[[int], pn.kernels.StationaryKernel]] = {
    "rbf": lambda d: pn.kernels.RBF(lengthscale=0.5),
    "matern12": lambda d: pn.kernels.Matern(nu=0.5, lengthscale=0.7),
    "matern32-ard": lambda d: pn.kernels.Matern(
        nu=1.5, lengthscale=torch.linspace(0.4, 1.0, d, dtype=F64)
    ),
    "matern52": lambda d: pn.kernels.Matern(nu=2.5, lengthscale=0.4, outputscale=1.5),
}


@dataclass
class Problem:
    """A kernel system with right-hand sides and its dense reference."""

    system: KernelSystem
    B: torch.Tensor
    K: torch.Tensor  # the system's K̂ in float64 (from an uncounted twin system)

    @property
    def n(self) -> int:
        return self.system.n

    def exact(self) -> torch.Tensor:
        """``K̂⁻¹ B`` by ``torch.linalg.solve`` in float64."""
        return torch.linalg.solve(self.K, self.B.double())

    def relres(self, U: torch.Tensor) -> torch.Tensor:
        """True relative residual norms per column, in float64, shape ``(k,)``."""
        B = self.B.double()
        R = B - self.K @ U.double()
        return torch.linalg.vector_norm(R, dim=0) / torch.linalg.vector_norm(B, dim=0)

    def cond(self) -> float:
        lam = torch.linalg.eigvalsh(self.K)
        return float(lam[-1] / lam[0])


def build_problem(
    n: int = 120,
    d: int = 2,
    k: int = 4,
    *,
    kernel: str = "rbf",
    noise: float = 1.0,
    dtype: torch.dtype = F64,
    seed: int = 0,
    backend: str = "auto",
    lengthscale: float | None = None,
) -> Problem:
    """Uniform inputs in ``[0, 1]^d`` and Gaussian right-hand sides ``(n, k)``."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64).to(dtype)
    B = torch.randn(n, k, generator=g, dtype=F64).to(dtype)
    kern = KERNELS[kernel](d)
    if lengthscale is not None:
        kern.lengthscale = lengthscale
    system = KernelSystem(kern, X, noise, backend=backend)
    twin = KernelSystem(kern, X, noise, backend=backend)
    K = twin.row_block(torch.arange(n)).double()
    return Problem(system, B, 0.5 * (K + K.mT))


#: Solver factories with settings that converge quickly on the test systems.
SOLVERS: dict[str, Callable[..., object]] = {
    "cg": lambda **kw: ConjugateGradients(**{"preconditioner_rank": 20, **kw}),
    "ap": lambda **kw: AlternatingProjections(**{"block_size": 40, **kw}),
    "sgd": lambda **kw: StochasticGradientDescent(**{"batch_size": 40, "learning_rate": 1.0, **kw}),
}


class EntryCounter:
    """Independent count of kernel entries: wraps a system's public accesses.

    Counts from the shapes of the calls alone (``n²`` per product, ``b·n`` per row or
    column product or row block, ``b²`` per block, ``n`` per diagonal), never from
    ``system.entries``; :attr:`by_access` splits the count by access name. Products
    through the operator interface (``matmat``, ``@``) and column blocks reach the
    wrapped ``matmul`` and ``row_block``.
    """

    def __init__(self, system: KernelSystem, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries = 0
        self.by_access: dict[str, int] = {}
        self.blocks: list[tuple[int, ...]] = []
        n = system.n
        wrap = {
            "matmul": lambda V: n * n,
            "rows": lambda idx, V: idx.numel() * n,
            "columns": lambda idx, W: idx.numel() * n,
            "row_block": lambda idx: len(idx) * n,  # a tensor or (column_block) a list
            "block": lambda idx: idx.numel() ** 2,
            "diagonal": lambda: n,
        }
        for name, cost in wrap.items():
            monkeypatch.setattr(system, name, self._counting(getattr(system, name), cost, name))

    def _counting(self, method, cost, name):
        def counted(*args):
            entries = cost(*args)
            self.entries += entries
            self.by_access[name] = self.by_access.get(name, 0) + entries
            if name == "block":
                self.blocks.append(tuple(int(i) for i in args[0]))
            return method(*args)

        return counted


def iteration_cap(solver: object, n: int, max_epochs: float) -> int:
    """Iterations Algorithms 1–3 run at budget ``T``: ``⌊T⌋`` for CG, ``⌊T·n/b⌋`` else."""
    if isinstance(solver, ConjugateGradients):
        return math.floor(max_epochs)
    b = solver.block_size if isinstance(solver, AlternatingProjections) else solver.batch_size
    return math.floor(max_epochs * n / min(b, n))


def iteration_entries(solver: object, count: EntryCounter, iterations: int, n: int) -> int:
    """Entries of the iterations alone, from the counted accesses: a product ``K̂ D`` per
    CG iteration, ``K̂[:, I] Δ`` per alternating-projections iteration, ``K̂[I, :] U`` per
    SGD iteration."""
    if isinstance(solver, ConjugateGradients):
        return iterations * n * n
    if isinstance(solver, AlternatingProjections):
        return count.by_access.get("columns", 0)
    return count.by_access.get("rows", 0)
