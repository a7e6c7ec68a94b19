"""Random actions: i.i.d. Gaussian, Rademacher or sparse-sign sketching directions."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from .._core import random as rnd
from ._common import check_block_size, require_generator
from .base import Policy

if TYPE_CHECKING:
    from ..solvers.state import SolverState

__all__ = ["Random"]

_DISTRIBUTIONS = ("gaussian", "rademacher", "sparse_sign")

#: Non-zeros per column of a sparse-sign action when neither ``nnz`` nor ``density``
#: is given (the usual choice for sparse sign embeddings; capped at ``n``).
DEFAULT_NNZ = 8


class Random(Policy):
    """I.i.d. random actions drawn from the solve's ``generator``.

    Random directions make the belief's uncertainty reduction independent of ``b``
    (unlike CG). After ``n`` independent actions the belief is exact.

    Parameters
    ----------
    distribution
        ``"gaussian"`` (entries ``N(0, 1)``), ``"rademacher"`` (entries ``±1``) or
        ``"sparse_sign"`` (per column ``nnz`` distinct rows with entries
        ``±1/√nnz``, zero elsewhere; unit-norm columns).
    block_size
        Columns per iteration: actions have shape ``(n, block_size)``.
    nnz
        Non-zeros per column for ``"sparse_sign"`` (capped at ``n``; default
        :data:`DEFAULT_NNZ`). Exclusive with ``density``.
    density
        Fraction of non-zeros per column for ``"sparse_sign"``, in ``(0, 1]``:
        ``nnz = max(1, round(density · n))``.

    Notes
    -----
    The policy needs ``generator=`` in :meth:`~pnsolve.ProbabilisticLinearSolver.solve`
    (a ``ValueError`` says so otherwise). Numbers are drawn on the generator's
    device and moved to ``A``'s; the same seed gives the same actions.
    """

    def __init__(
        self,
        distribution: str = "gaussian",
        block_size: int = 1,
        *,
        nnz: int | None = None,
        density: float | None = None,
    ) -> None:
        if not isinstance(distribution, str) or distribution not in _DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {_DISTRIBUTIONS}, got {distribution!r}")
        self.distribution = distribution
        self.block_size = check_block_size(block_size)
        if distribution != "sparse_sign" and (nnz is not None or density is not None):
            raise ValueError(
                f"nnz and density apply to distribution='sparse_sign' only, "
                f"got distribution={distribution!r}"
            )
        if nnz is not None and density is not None:
            raise ValueError("give at most one of nnz and density")
        if nnz is not None:
            check_block_size(nnz, "nnz")
        if density is not None and (
            isinstance(density, bool)
            or not isinstance(density, int | float)
            or not 0.0 < density <= 1.0
        ):
            raise ValueError(f"density must be a number in (0, 1], got {density!r}")
        self.nnz = nnz
        self.density = None if density is None else float(density)

    @property
    def adaptive(self) -> bool:
        """``False``: the actions come from the generator alone (calibrated beliefs)."""
        return False

    def nnz_for(self, n: int) -> int:
        """Non-zeros per sparse-sign column for a system of size ``n``."""
        if self.density is not None:
            return max(1, min(n, round(self.density * n)))
        return min(n, DEFAULT_NNZ if self.nnz is None else self.nnz)

    def __call__(
        self, state: SolverState, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, None]:
        """Return ``(S, None)``; ``S`` is ``(n, block_size)`` with ``A``'s dtype and device."""
        g = require_generator(generator, self)
        r = state.residual
        n, m, dev = r.shape[0], self.block_size, r.device
        if self.distribution == "gaussian":
            S = rnd.randn((n, m), generator=g, dtype=r.dtype, device=dev)
        elif self.distribution == "rademacher":
            S = rnd.rademacher((n, m), generator=g, dtype=r.dtype, device=dev)
        else:
            S = self._sparse_sign(n, m, g, r)
        return S, None

    def _sparse_sign(self, n: int, m: int, g: torch.Generator, r: torch.Tensor) -> torch.Tensor:
        nnz = self.nnz_for(n)
        # distinct rows, chosen on the generator's device (ties sort alike on every device)
        u = torch.rand(n, m, generator=g, dtype=torch.float32, device=g.device)
        rows = u.argsort(dim=0)[:nnz].to(r.device)
        signs = rnd.rademacher((nnz, m), generator=g, dtype=r.dtype, device=r.device)
        return r.new_zeros(n, m).scatter_(0, rows, signs / math.sqrt(nnz))

    def __repr__(self) -> str:
        extra = ""
        if self.distribution == "sparse_sign":
            extra = f", density={self.density}" if self.density is not None else f", nnz={self.nnz}"
        return f"Random(distribution={self.distribution!r}, block_size={self.block_size}{extra})"
