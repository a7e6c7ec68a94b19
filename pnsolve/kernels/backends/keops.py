"""The ``"keops"`` backend: pykeops ``LazyTensor`` reductions (the GPU backend).

pykeops is imported lazily. It compiles every formula × dtype × right-hand-side width
with a C++ compiler on first use (about 6 s each on CPU) and stores the builds in the
folder named by the environment variable ``KEOPS_CACHE_FOLDER`` (pykeops 2.3 reads it
when it is first imported; the Makefile points it at ``.keops_cache`` in the checkout).
KeOps differentiates its reductions itself, so autograd to the kernel's parameters,
the inputs and ``V`` works through ordinary torch operations.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from ..kernel import Kernel
from .vjp import recompute_vjp

__all__ = ["KEOPS_DEVICES", "KeOpsBackend", "import_lazy_tensor", "keops_available"]

#: Device types pykeops computes on.
KEOPS_DEVICES = ("cpu", "cuda")


def import_lazy_tensor() -> Any:
    """Return ``pykeops.torch.LazyTensor``.

    Raises
    ------
    ImportError
        If pykeops cannot be imported (the message names the ``"keops"`` backend).
    """
    try:
        from pykeops.torch import LazyTensor
    except Exception as e:  # pykeops raises various errors when its toolchain is missing
        folder = os.environ.get("KEOPS_CACHE_FOLDER", "~/.cache/keops<version>")
        raise ImportError(
            'KernelMatrix backend="keops" needs pykeops (pip install pnsolve[keops]) '
            f"and a C++ compiler; importing it failed: {type(e).__name__}: {e}. If pykeops "
            f"is installed, its build cache ({folder}) may be corrupt (e.g. a process was "
            'killed while writing it): delete it. Or use backend="chunked".'
        ) from e
    return LazyTensor


def keops_available() -> bool:
    """Whether pykeops imports (no formula is compiled)."""
    try:
        import_lazy_tensor()
    except ImportError:
        return False
    return True


class KeOpsBackend:
    """Products ``K(X1, X2) @ V`` as KeOps sum reductions.

    Parameters
    ----------
    kernel
        A matrix-free kernel (uses its :meth:`~pnsolve.kernels.Kernel.keops_formula`: a
        sum or product of kernels is one formula).
    X1, X2
        Inputs, ``X2 = None`` meaning ``X1``.
    self_offset
        With ``X2`` given: ``X1`` is rows ``self_offset, …`` of ``X2`` (a row block of a
        symmetric matrix, for a white-noise term).

    Raises
    ------
    ImportError
        If pykeops is missing.
    ValueError
        If the inputs are on a device pykeops does not compute on (not CPU or CUDA).
    """

    name = "keops"

    def __init__(
        self,
        kernel: Kernel,
        X1: torch.Tensor,
        X2: torch.Tensor | None,
        *,
        self_offset: int | None = None,
    ) -> None:
        if X1.device.type not in KEOPS_DEVICES:
            # pykeops reads raw pointers: on another device it would crash the process
            raise ValueError(
                f'backend="keops" runs on CPU and CUDA tensors, but X1 is on {X1.device}; '
                'use backend="chunked" there'
            )
        self._LazyTensor = import_lazy_tensor()
        self.kernel, self.X1, self.X2 = kernel, X1, X2
        self.self_offset = 0 if X2 is None else self_offset

    def _reduce(
        self, A: torch.Tensor, B: torch.Tensor, V: torch.Tensor, offset: int | None
    ) -> torch.Tensor:
        K = self.kernel.keops_formula(self._LazyTensor, A, B, offset)
        try:
            out = K @ V.contiguous()
        except Exception as e:  # compile or runtime failure inside KeOps
            raise RuntimeError(
                f'KernelMatrix backend="keops" failed to compile or run its formula: {e}. '
                'Use backend="chunked" instead.'
            ) from e
        return self.kernel.tile_scale(A) * out

    def matmat(self, V: torch.Tensor) -> torch.Tensor:
        """``K(X1, X2) @ V`` for ``V`` of shape ``(n2, k)``."""
        return self._reduce(self.X1, self.X1 if self.X2 is None else self.X2, V, self.self_offset)

    def rmatmat(self, V: torch.Tensor) -> torch.Tensor:
        """``K(X2, X1) @ V`` for ``V`` of shape ``(n1, k)``."""
        back = None if self.self_offset is None else -self.self_offset
        return self._reduce(self.X1 if self.X2 is None else self.X2, self.X1, V, back)

    def vjp(
        self, V: torch.Tensor, G: torch.Tensor, *, need_X1: bool, need_X2: bool
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, list[torch.Tensor]]:
        """Gradients of ``Σ G ⊙ (K V)`` (see :func:`~.vjp.recompute_vjp`)."""
        return recompute_vjp(
            lambda a, b, v: self._reduce(a, a if b is None else b, v, self.self_offset),
            self.kernel, self.X1, self.X2, V, G, need_X1=need_X1, need_X2=need_X2,
        )  # fmt: skip
