"""Sums and products of kernels (``k1 + k2``, ``k1 * k2``), evaluated in one fused pass."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import nn

from ._exp import clamped_exp_
from .kernel import Kernel, TileOperands
from .spectral_algebra import product_base, product_projection, sum_base, sum_projection

__all__ = ["Product", "Sum"]


class _Composite(Kernel):
    """Shared parts of :class:`Sum` and :class:`Product` (parts flattened, one module)."""

    _symbol = ""

    def __init__(self, *kernels: Kernel) -> None:
        super().__init__()
        parts: list[Kernel] = []
        for k in kernels:
            if not isinstance(k, Kernel):
                raise TypeError(
                    f"{type(self).__name__} combines pnsolve kernels, got {type(k).__name__}"
                )
            parts.extend(k.parts if isinstance(k, _Composite) and type(k) is type(self) else [k])
        if len(parts) < 2:
            raise ValueError(f"{type(self).__name__} needs at least two kernels")
        self.kernels = nn.ModuleList(parts)

    @property
    def parts(self) -> list[Kernel]:
        """The kernels combined, in order (nested sums/products of the same kind flattened)."""
        return cast(list[Kernel], list(self.kernels))

    @property
    def matrix_free(self) -> bool:  # type: ignore[override]
        """Whether every part is matrix-free."""
        return all(k.matrix_free for k in self.parts)

    @property
    def has_keops_formula(self) -> bool:  # type: ignore[override]
        """Whether every part has a KeOps formula."""
        return all(k.has_keops_formula for k in self.parts)

    @property
    def stationary(self) -> bool:  # type: ignore[override]
        """Whether every part is stationary."""
        return all(k.stationary for k in self.parts)

    @property
    def has_spectral_features(self) -> bool:  # type: ignore[override]
        """Whether every part has random Fourier features."""
        return all(k.has_spectral_features for k in self.parts)

    def spectral_state(self) -> tuple[float, ...]:
        """The parts' spectral states, concatenated."""
        return tuple(v for k in self.parts for v in k.spectral_state())

    #: How the parts' random features combine (:mod:`~.spectral_algebra`): base draws
    #: and projections of a sum (side by side) or a product (frequencies add).
    _combine_base = staticmethod(sum_base)
    _combine_projection = staticmethod(sum_projection)

    def spectral_base(
        self,
        num_features: int,
        input_dim: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> torch.Tensor:
        """The parts' draws, combined as the sum or product needs."""
        return self._combine_base(
            self.parts, num_features, input_dim, generator=generator, dtype=dtype, device=device
        )

    def spectral_projection(
        self, X: torch.Tensor, base: torch.Tensor, phases: torch.Tensor, num_features: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The parts' projections, combined as the sum or product needs."""
        return self._combine_projection(self.parts, X, base, phases, num_features)

    def input_dims(self) -> tuple[int | None, int]:
        """The strictest requirement of the parts (they must agree on an exact ``d``)."""
        exact: int | None = None
        minimum = 0
        for k in self.parts:
            e, m = k.input_dims()
            if e is not None:
                if exact is not None and e != exact:
                    raise ValueError(
                        f"the parts of this {type(self).__name__.lower()} have {exact} and {e} "
                        "ARD lengthscales; give them active_dims or equal ARD sizes"
                    )
                exact = e
            minimum = max(minimum, m)
        return exact, minimum

    def bind(self, X: torch.Tensor) -> Kernel:
        """Each part bound to ``X`` (a new composite only if a part changed)."""
        bound = [k.bind(X) for k in self.parts]
        if all(b is k for b, k in zip(bound, self.parts)):
            return self
        return type(self)(*bound)

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """The parts' operands (nested)."""
        return tuple(k.tile_operands(X, left) for k in self.parts)

    def extra_repr(self) -> str:
        """Nothing: the parts print themselves."""
        return ""

    def __repr__(self) -> str:
        return f"({f' {self._symbol} '.join(repr(k) for k in self.parts)})"


class Sum(_Composite):
    """``k(x, x') = Σ_p k_p(x, x')``; written ``k1 + k2``.

    Parameters
    ----------
    *kernels
        Two or more kernels (nested sums are flattened). Their parameters are the sum's
        parameters (one module).

    Notes
    -----
    On the ``"chunked"`` backend each tile is filled by the first part and the later
    parts' values are added in a scratch tile: one pass over the tiles for the whole sum.
    On ``"keops"`` the sum is one formula.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> k = pn.kernels.RBF(lengthscale=0.5) + pn.kernels.Matern(nu=1.5)
    >>> k(torch.zeros(2, 1, dtype=torch.float64))
    tensor([[2., 2.],
            [2., 2.]], dtype=torch.float64, grad_fn=<AddBackward0>)
    """

    _symbol = "+"

    @property
    def tile_buffers(self) -> int:  # type: ignore[override]
        """The first part's scratch, and one tile for each later non-constant part's values."""
        need = self.parts[0].tile_buffers
        for k in self.parts[1:]:
            if not (k.tile_is_ones or k.tile_is_diagonal):
                need = max(need, 1 + k.tile_buffers)
        return need

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        return _reduce(operator.add, [k._dense(X1, X2, self_index) for k in self.parts])

    def spectral_width(self, input_dim: int) -> int:
        """The part index and the widest part's draws."""
        return 1 + max(k.spectral_width(input_dim) for k in self.parts)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return _reduce(operator.add, [k._diag(X) for k in self.parts])

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return _reduce(operator.add, [k._paired(X1, X2) for k in self.parts])

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """The parts' operands; the left side adds each later part's scale ratio (0-d)."""
        ops = super().tile_operands(X, left)
        if not left:
            return ops
        first = self.parts[0].tile_scale(X)
        ratios = tuple((k.tile_scale(X) / first).detach() for k in self.parts[1:])
        return (*ops, ratios)

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """Part 0 into ``s``; each later part into ``work[0]``, added with its scale ratio."""
        first, *rest = self.parts
        ratios = a[-1]
        first.fill_tile_(s, a[0], b[0], diag, work)
        for j, k in enumerate(rest, start=1):
            if k.tile_is_ones:
                s.add_(ratios[j - 1])
                continue
            if k.tile_is_diagonal:  # white noise: only the self pairs, no tile
                if diag is not None:
                    s.diagonal(diag).add_(ratios[j - 1])
                continue
            w = work[0]
            k.fill_tile_(w, a[j], b[j], diag, work[1:])
            s.addcmul_(w, ratios[j - 1])

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """The first part's scale (the others enter the tiles as ratios to it)."""
        return self.parts[0].tile_scale(like)

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``f_0 + Σ_p (s_p / s_0) f_p`` with the ratios as pykeops parameters."""
        first = self.parts[0].tile_scale(A)
        out = self.parts[0].keops_formula(LazyTensor, A, B, self_offset)
        for k in self.parts[1:]:
            ratio = LazyTensor((k.tile_scale(A) / first).reshape(1))
            out = out + ratio * k.keops_formula(LazyTensor, A, B, self_offset)
        return out


class Product(_Composite):
    """``k(x, x') = Π_p k_p(x, x')``; written ``k1 * k2``.

    Parameters
    ----------
    *kernels
        Two or more kernels (nested products are flattened).

    Notes
    -----
    The parts' scales multiply once per product (``tile_scale``); on the ``"chunked"``
    backend each tile holds the first part's values times the later parts' (filled in a
    scratch tile; a :class:`~pnsolve.kernels.Constant` part costs nothing per tile).
    On ``"keops"`` the product is one formula.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> k = pn.kernels.Constant(2.0) * pn.kernels.RBF(lengthscale=0.5)
    >>> float(k.diag(torch.zeros(1, 1, dtype=torch.float64))[0])
    2.0
    """

    _symbol = "*"
    _combine_base = staticmethod(product_base)
    _combine_projection = staticmethod(product_projection)

    def __init__(self, *kernels: Kernel) -> None:
        super().__init__(*kernels)
        self._fused, self._rest = self._groups()

    @property
    def tile_exp(self) -> bool:  # type: ignore[override]
        """Whether every non-constant part is an exp tile (then so is the product)."""
        parts = [k for k in self.parts if not k.tile_is_ones]
        return bool(parts) and all(k.tile_exp for k in parts)

    def _groups(self) -> tuple[list[int], list[int]]:
        """``(exp parts fused into one GEMM, other non-constant parts)`` by index.

        Computed once at construction (the parts' kinds are class attributes), not per
        tile.

        Two or more exp parts (RBF, periodic) share one GEMM of their concatenated
        operands and one ``exp``: ``exp(a₁b₁ᵀ) exp(a₂b₂ᵀ) = exp([a₁ a₂][b₁ b₂]ᵀ)``.
        """
        live = [j for j, k in enumerate(self.parts) if not k.tile_is_ones]
        fused = [j for j in live if self.parts[j].tile_exp]
        if len(fused) < 2:
            fused = []
        return fused, [j for j in live if j not in fused]

    @property
    def tile_buffers(self) -> int:  # type: ignore[override]
        """The first part's scratch, and one tile for each later one's values."""
        fused, rest = self._fused, self._rest
        if not fused and not rest:
            return self.parts[0].tile_buffers
        need = 0 if fused else self.parts[rest[0]].tile_buffers
        for j in rest if fused else rest[1:]:
            need = max(need, 1 + self.parts[j].tile_buffers)
        return need

    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """The parts' operands, then the exp parts' operands concatenated (or ``()``)."""
        ops = super().tile_operands(X, left)
        fused = self._fused
        merged = torch.cat([ops[j][0] for j in fused], dim=1) if fused else ()
        return (*ops, merged)

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        return _reduce(operator.mul, [k._dense(X1, X2, self_index) for k in self.parts])

    @property
    def has_spectral_features(self) -> bool:  # type: ignore[override]
        """Whether every part has random features and is stationary (frequencies add)."""
        return all(k.has_spectral_features and k.stationary for k in self.parts)

    def spectral_width(self, input_dim: int) -> int:
        """Every part's draws side by side."""
        return sum(k.spectral_width(input_dim) for k in self.parts)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        return _reduce(operator.mul, [k._diag(X) for k in self.parts])

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        return _reduce(operator.mul, [k._paired(X1, X2) for k in self.parts])

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """The first non-constant part into ``s``; each later one into ``work[0]``, multiplied in.

        Constant parts write nothing (their value is in :meth:`tile_scale`); exp parts
        (RBF, periodic) are one GEMM of their concatenated operands and one ``exp``.
        """
        fused, rest = self._fused, self._rest
        if fused:
            torch.mm(a[-1], b[-1].mT, out=s)
            if diag is not None:
                s.diagonal(diag).zero_()
            clamped_exp_(s)  # one exp, its exponent floored (kernels/_exp.py)
        elif rest:
            head, *rest = rest
            self.parts[head].fill_tile_(s, a[head], b[head], diag, work)
        else:  # a product of constants
            self.parts[0].fill_tile_(s, a[0], b[0], diag, work)
        for j in rest:
            w = work[0]
            self.parts[j].fill_tile_(w, a[j], b[j], diag, work[1:])
            s.mul_(w)

    def tile_scale(self, like: torch.Tensor) -> torch.Tensor:
        """The product of the parts' scales."""
        return _reduce(operator.mul, [k.tile_scale(like) for k in self.parts])

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """``Π_p f_p`` (constant parts left out: their scale is the whole kernel)."""
        forms = [
            k.keops_formula(LazyTensor, A, B, self_offset) for k in self.parts if not k.tile_is_ones
        ]
        if not forms:  # a product of constants
            return self.parts[0].keops_formula(LazyTensor, A, B, self_offset)
        return _reduce(operator.mul, forms)


def _reduce(op: Any, values: Sequence[Any]) -> Any:
    return functools.reduce(op, values)
