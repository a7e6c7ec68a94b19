"""A GPyTorch kernel evaluated by GPyTorch itself, as a matrix-free pnsolve kernel.

What :func:`~pnsolve.kernels.from_gpytorch` returns where a GPyTorch kernel has no exact
native equivalent; also the GPyTorch helpers the converter shares with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import torch

from .active_dims import check_active_dims, minimum_dims, select_dims
from .kernel import Kernel, TileOperands

__all__ = ["GPyTorchKernel"]


def _gpytorch() -> Any:
    """The ``gpytorch`` module, or an ImportError saying how to install it."""
    try:  # through importlib: GPyTorch ships no type information for mypy to read
        return importlib.import_module("gpytorch")
    except ImportError as err:
        raise ImportError(
            "converting GPyTorch kernels needs GPyTorch, an optional dependency of pnsolve: "
            "pip install gpytorch"
        ) from err


# --------------------------------------------------------------------------- from_gpytorch
def _name(k: Any) -> str:
    """``type(k).__name__``, with the module for classes from outside ``gpytorch.kernels``."""
    t = type(k)
    if t.__module__.startswith("gpytorch.kernels"):
        return t.__name__
    return f"{t.__module__}.{t.__qualname__}"


def _check_unbatched(kernel: Any) -> None:
    """Refuse a kernel with a ``batch_shape`` anywhere in the expression, naming it."""
    gpytorch = _gpytorch()
    for m in kernel.modules():
        if not isinstance(m, gpytorch.kernels.Kernel):
            continue
        shape = getattr(m, "_batch_shape", None)
        shape = m.batch_shape if shape is None else shape
        if len(shape) > 0:
            raise ValueError(
                f"{_name(m)} with batch_shape={tuple(shape)} has no pnsolve equivalent: "
                "pnsolve kernels give one (n1, n2) matrix for (n, d) inputs; use one kernel "
                "without batch_shape per output"
            )


def _dims(k: Any) -> tuple[int, ...] | None:
    """A GPyTorch kernel's ``active_dims`` (a LongTensor buffer) as a tuple, or ``None``."""
    dims = getattr(k, "active_dims", None)
    if dims is None:
        return None
    values = dims.reshape(-1).tolist() if isinstance(dims, torch.Tensor) else list(dims)
    return tuple(int(i) for i in values)


def _compose(
    cols: tuple[int, ...] | None, dims: tuple[int, ...] | None, k: Any
) -> tuple[int, ...] | None:
    """Columns of the original inputs after selecting ``cols`` and then ``dims``."""
    if dims is None:
        return cols
    if cols is None:
        return dims
    if max(dims) >= len(cols) or min(dims) < 0:
        raise ValueError(
            f"{_name(k)} has active_dims={list(dims)} but the kernel around it passes it "
            f"{len(cols)} columns (its active_dims={list(cols)})"
        )
    return tuple(cols[i] for i in dims)


class GPyTorchKernel(Kernel):
    """A GPyTorch kernel evaluated by GPyTorch, as a matrix-free pnsolve kernel.

    What :func:`~pnsolve.kernels.from_gpytorch` returns for a kernel without an exact
    native equivalent (e.g. a user's ``gpytorch.kernels.Kernel`` subclass). Values are
    GPyTorch's own: every block is ``kernel(x1, x2).to_dense()`` on the block's rows.

    Parameters
    ----------
    kernel
        A ``gpytorch.kernels.Kernel`` without ``batch_shape``. It becomes the submodule
        :attr:`gpytorch_kernel`: its parameters *are* this kernel's parameters (shared,
        not copied), so gradients reach them and an optimiser over
        ``GPyTorchKernel.parameters()`` trains the GPyTorch module itself.
    active_dims
        Input columns passed to the GPyTorch kernel (default all), before its own
        ``active_dims`` select from them.

    Raises
    ------
    ImportError
        If GPyTorch is not installed.
    TypeError
        If ``kernel`` is not a ``gpytorch.kernels.Kernel``.
    ValueError
        For a kernel with a ``batch_shape``, or own ``active_dims`` reaching past the
        columns ``active_dims`` passes it.

    Notes
    -----
    **Backends.** The kernel is matrix-free: ``"dense"`` forms ``K`` through GPyTorch
    (differentiable), ``"chunked"`` (and ``"distributed"`` with chunked or dense rank
    blocks) evaluates GPyTorch on each tile's rows — :meth:`tile_operands` are the inputs
    themselves and :meth:`fill_tile_` writes ``kernel(a, b).to_dense()`` into the tile
    in place — and its backward recomputes tiles with autograd through GPyTorch. It
    costs one GPyTorch call per tile (a few Python-level operations more than a native
    tile; on a GPU, GPyTorch's distance code also reads ``torch.equal(x1, x2)`` back to
    the host once per call). ``"keops"`` is refused (:meth:`keops_formula`): a GPyTorch
    forward is not a formula KeOps can compile; ``backend="auto"`` knows it
    (:attr:`has_keops_formula` is false) and picks ``"chunked"`` where it would pick
    ``"keops"`` for a native kernel.

    **Self pairs.** GPyTorch kernels are functions of the input values: a point and an
    equal point of another input set get the same value as a point with itself, so the
    self-pair marks of the tile protocol (``diag``, ``self_index``) change nothing.
    GPyTorch gives exact zero self distances when it is called with ``x2`` equal to
    ``x1``; other blocks carry the rounding of its distances.

    **Dtype rule.** Outputs follow the inputs' dtype; the GPyTorch kernel computes in
    its parameters' dtype or higher and is never cast by pnsolve (its parameters stay
    the module's). Inputs of the parameters' dtype are passed as they are; inputs of a
    lower precision (float32 data, a float64 kernel) are cast up exactly and the values
    rounded to the inputs' dtype; inputs of a higher precision than the parameters
    (float64 data with GPyTorch's default float32 kernel) are refused with a
    ``TypeError``, as is a kernel returning values of lower precision than its inputs:
    either would give float32-accurate values to a float64 computation. Cast the
    GPyTorch kernel to the data's dtype — ``gpytorch_kernel.double()`` before wrapping,
    or ``.double()`` on this kernel, which casts the GPyTorch module in place (it is
    shared). A kernel without floating parameters computes in the inputs' dtype.

    Examples
    --------
    >>> import torch, gpytorch, pnsolve as pn
    >>> class Laplace(gpytorch.kernels.Kernel):
    ...     has_lengthscale = True
    ...     def forward(self, x1, x2, diag=False, **params):
    ...         d = self.covar_dist(x1.div(self.lengthscale), x2.div(self.lengthscale), diag=diag)
    ...         return torch.exp(-d)
    >>> k = pn.kernels.from_gpytorch(Laplace().double())
    >>> k
    GPyTorchKernel(Laplace)
    >>> X = torch.randn(300, 2, dtype=torch.float64)
    >>> K = k.linop(X, backend="chunked", tile=(64, 128))
    >>> v = torch.ones(300, dtype=torch.float64)
    >>> with torch.no_grad():
    ...     bool(torch.allclose(K @ v, k(X) @ v))
    True
    """

    matrix_free = True
    #: Tiles on the calling thread only: evaluating one enters GPyTorch's global
    #: ``settings`` contexts, which are not safe to enter from several threads at once.
    parallel_tiles = False

    def __init__(self, kernel: Any, *, active_dims: Sequence[int] | None = None) -> None:
        gpytorch = _gpytorch()
        if not isinstance(kernel, gpytorch.kernels.Kernel):
            raise TypeError(
                f"GPyTorchKernel wraps a gpytorch.kernels.Kernel, got {type(kernel).__name__}"
            )
        _check_unbatched(kernel)
        super().__init__()
        #: Input columns passed to the GPyTorch kernel (``None``: all).
        self.active_dims = check_active_dims(active_dims)
        own = _dims(kernel)
        if self.active_dims is not None and own is not None:
            _compose(self.active_dims, own, kernel)  # own columns must exist in the selection
        #: The wrapped GPyTorch kernel (a submodule: its parameters are this kernel's).
        self.gpytorch_kernel = kernel

    # -------------------------------------------------------------- evaluation
    def input_dims(self) -> tuple[int | None, int]:
        """``(None, 1 + the largest column read)``: GPyTorch checks the rest."""
        if self.active_dims is not None:
            return None, minimum_dims(self.active_dims)
        return None, minimum_dims(_dims(self.gpytorch_kernel))

    def _prepare(self, X: torch.Tensor, name: str) -> torch.Tensor:
        """The active columns of ``X`` in the dtype the GPyTorch kernel computes in."""
        X = select_dims(X, self.active_dims)
        dtype = self._compute_dtype(X.dtype, name)
        return X if X.dtype == dtype else X.to(dtype)

    def _compute_dtype(self, dtype: torch.dtype, name: str) -> torch.dtype:
        """The parameters' dtype if it is at least as precise as ``dtype``; else TypeError."""
        kernel_dtype: torch.dtype | None = None
        for p in self.gpytorch_kernel.parameters():
            if p.is_floating_point():
                kernel_dtype = (
                    p.dtype if kernel_dtype is None else torch.promote_types(kernel_dtype, p.dtype)
                )
        if kernel_dtype is None or kernel_dtype == dtype:
            return dtype
        if torch.promote_types(kernel_dtype, dtype) == kernel_dtype:
            return kernel_dtype
        raise TypeError(
            f"{name} is {dtype} but the GPyTorch kernel {_name(self.gpytorch_kernel)} has "
            f"{kernel_dtype} parameters, so its values would have {kernel_dtype} accuracy: "
            f"cast the GPyTorch kernel to the data's dtype (gpytorch_kernel.to({dtype}), "
            "e.g. .double(), before wrapping it, or .to() on the GPyTorchKernel, which casts "
            "the GPyTorch kernel it shares)"
        )

    def _call(
        self, x1: torch.Tensor, x2: torch.Tensor | None, *, diag: bool, dtype: torch.dtype
    ) -> torch.Tensor:
        """GPyTorch's dense block (or paired values with ``diag``) on prepared inputs."""
        gpytorch = _gpytorch()
        to_dense = importlib.import_module("linear_operator").to_dense  # GPyTorch's dependency
        with gpytorch.settings.lazily_evaluate_kernels(False):
            out = to_dense(self.gpytorch_kernel(x1, x2, diag=diag))
        n2 = (x1 if x2 is None else x2).shape[0]
        shape = (x1.shape[0],) if diag else (x1.shape[0], n2)
        if tuple(out.shape) != shape:
            raise RuntimeError(
                f"the GPyTorch kernel {_name(self.gpytorch_kernel)} returned shape "
                f"{tuple(out.shape)} where GPyTorchKernel needs {shape}"
                f"{' (diag=True)' if diag else ''}"
            )
        if out.dtype != dtype and torch.promote_types(out.dtype, dtype) != out.dtype:
            raise TypeError(
                f"the GPyTorch kernel {_name(self.gpytorch_kernel)} returned {out.dtype} "
                f"values for {dtype} inputs: cast it to the data's dtype (e.g. .double())"
            )
        return out

    def _evaluate(self, X1: torch.Tensor, X2: torch.Tensor | None, *, diag: bool) -> torch.Tensor:
        """Differentiable values in ``X1``'s dtype."""
        x1 = self._prepare(X1, "X1")
        x2 = None if X2 is None else self._prepare(X2, "X2")
        return self._call(x1, x2, diag=diag, dtype=X1.dtype).to(X1.dtype)

    def _dense_graph(
        self, X1: torch.Tensor, X2: torch.Tensor | None, self_index: torch.Tensor | None
    ) -> torch.Tensor:
        """``kernel(X1, X2).to_dense()`` (differentiable; ``self_index`` changes nothing)."""
        return self._evaluate(X1, X2, diag=False)

    def _diag(self, X: torch.Tensor) -> torch.Tensor:
        """``kernel(X, diag=True)``, shape ``(n,)``."""
        return self._evaluate(X, None, diag=True)

    def _paired(self, X1: torch.Tensor, X2: torch.Tensor) -> torch.Tensor:
        """``kernel(X1, X2, diag=True)``: ``k(X1_i, X2_i)``, shape ``(m,)``.

        GPyTorch's ``diag=True`` mode gives the paired values of two different input
        sets for its built-in kernels (1.15); a custom kernel's ``forward`` must too
        (or ignore ``diag``: GPyTorch then takes the diagonal of the full block).
        """
        return self._evaluate(X1, X2, diag=True)

    # ----------------------------------------------------------- tile protocol
    def tile_operands(self, X: torch.Tensor, left: bool) -> TileOperands:
        """The inputs themselves (active columns, in the kernel's compute dtype)."""
        return (self._prepare(X, "X1" if left else "X2"),)

    def fill_tile_(
        self,
        s: torch.Tensor,
        a: TileOperands,
        b: TileOperands,
        diag: int | None,
        work: Sequence[torch.Tensor],
    ) -> None:
        """``kernel(a, b).to_dense()`` written into ``s`` in place (no autograd).

        ``diag`` is ignored: GPyTorch kernels are functions of the values.
        """
        with torch.no_grad():
            s.copy_(self._call(a[0], b[0], diag=False, dtype=s.dtype))

    def keops_formula(
        self, LazyTensor: Any, A: torch.Tensor, B: torch.Tensor, self_offset: int | None
    ) -> Any:
        """Refused: a GPyTorch forward is not a KeOps formula.

        Raises
        ------
        NotImplementedError
            Always, naming ``backend="keops"``, the wrapped class and the backends to use.
        """
        raise NotImplementedError(
            f'backend="keops" needs a KeOps formula, and GPyTorchKernel evaluates the '
            f"GPyTorch kernel {_name(self.gpytorch_kernel)} through its forward, which KeOps "
            'cannot compile: use backend="chunked" or backend="dense"'
        )

    def __repr__(self) -> str:
        dims = "" if self.active_dims is None else f", active_dims={list(self.active_dims)}"
        return f"GPyTorchKernel({type(self.gpytorch_kernel).__name__}{dims})"
