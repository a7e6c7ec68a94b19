"""Conversion of array-likes and foreign operators to :class:`LinearOperator`."""

from __future__ import annotations

import numpy as np
import torch

from .base import LinearOperator
from .closure import Closure
from .dense import Dense

__all__ = ["as_linop"]


def as_linop(
    obj: object,
    *,
    is_symmetric: bool | None = None,
    is_psd: bool = False,
) -> LinearOperator:
    """Wrap ``obj`` as a pnsolve :class:`LinearOperator`.

    Parameters
    ----------
    obj
        One of: a pnsolve ``LinearOperator`` (returned as is); a floating
        ``torch.Tensor`` of shape ``(m, n)`` (dense or sparse); a NumPy array;
        a SciPy sparse matrix/array; a ``scipy.sparse.linalg.LinearOperator``.
    is_symmetric
        Structural flag for wrapped matrices. ``None``: checked numerically for
        dense inputs, taken as ``False`` for matrix-free foreign operators.
    is_psd
        Structural flag (not checked).

    Returns
    -------
    LinearOperator
        Products follow the dtype (and, for torch inputs, the device) of ``obj``.
        NumPy and SciPy inputs give CPU operators; integer arrays become float64.

    Raises
    ------
    TypeError
        If ``obj`` is none of the above (the message names the type).
    ValueError
        If ``obj`` is not two-dimensional.
    """
    if isinstance(obj, LinearOperator):
        return obj
    if isinstance(obj, torch.Tensor):
        return _from_tensor(obj, is_symmetric, is_psd)
    if isinstance(obj, np.ndarray):
        arr = obj if np.issubdtype(obj.dtype, np.floating) else obj.astype(np.float64)
        return _from_tensor(torch.from_numpy(np.ascontiguousarray(arr)), is_symmetric, is_psd)
    try:
        import scipy.sparse as sp
        import scipy.sparse.linalg as spla
    except ImportError:  # pragma: no cover - scipy is a hard dependency
        sp = spla = None
    if sp is not None and sp.issparse(obj):
        mat = obj.tocsr()
        if not np.issubdtype(mat.dtype, np.floating):
            mat = mat.astype(np.float64)
        sym = bool(is_symmetric) if is_symmetric is not None else _sparse_symmetric(mat)
        return _from_scipy_callable(
            mat.shape, mat.dtype, mat.__matmul__, mat.T.__matmul__, mat.diagonal, sym, is_psd
        )
    if spla is not None and isinstance(obj, spla.LinearOperator):
        dtype = np.dtype(obj.dtype) if obj.dtype is not None else np.dtype(np.float64)
        if not np.issubdtype(dtype, np.floating):
            dtype = np.dtype(np.float64)
        return _from_scipy_callable(
            obj.shape, dtype, obj.matmat, obj.rmatmat, None, bool(is_symmetric), is_psd
        )
    raise TypeError(
        "as_linop expects a pnsolve LinearOperator, a torch.Tensor, a numpy array, a scipy "
        f"sparse matrix or a scipy LinearOperator; got {type(obj).__name__}"
    )


def _from_tensor(t: torch.Tensor, is_symmetric: bool | None, is_psd: bool) -> LinearOperator:
    if t.ndim != 2:
        raise ValueError(f"an operator needs a 2-D array, got shape {tuple(t.shape)}")
    if not t.is_floating_point():
        t = t.to(torch.float64)
    if t.layout != torch.strided:
        sparse = t.coalesce() if t.layout == torch.sparse_coo else t.to_sparse_coo().coalesce()
        sparse_t = sparse.t().coalesce()
        return Closure(
            lambda X: sparse @ X,
            (int(t.shape[0]), int(t.shape[1])),
            dtype=t.dtype,
            device=t.device,
            rmatmat=lambda X: sparse_t @ X,
            is_symmetric=bool(is_symmetric),
            is_psd=is_psd,
        )
    return Dense(t, is_symmetric=is_symmetric, is_psd=is_psd)


def _from_scipy_callable(shape, np_dtype, mat, rmat, diag, symmetric: bool, is_psd: bool):
    torch_dtype = torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype

    def run(fn, X: torch.Tensor) -> torch.Tensor:
        out = np.asarray(fn(X.detach().cpu().numpy()))
        if out.ndim == 1:
            out = out[:, None]
        return torch.from_numpy(np.ascontiguousarray(out, dtype=np_dtype))

    return Closure(
        lambda X: run(mat, X),
        (int(shape[0]), int(shape[1])),
        dtype=torch_dtype,
        device="cpu",
        rmatmat=(lambda X: run(rmat, X)) if rmat is not None else None,
        diagonal=(lambda: torch.from_numpy(np.asarray(diag(), dtype=np_dtype)))
        if diag is not None
        else None,
        is_symmetric=symmetric,
        is_psd=is_psd,
    )


def _sparse_symmetric(mat) -> bool:
    if mat.shape[0] != mat.shape[1]:
        return False
    diff = abs(mat - mat.T)
    scale = abs(mat).max() if mat.nnz else 0.0
    return (
        bool(diff.max() <= 100 * np.finfo(mat.dtype).eps * max(scale, 1e-300)) if mat.nnz else True
    )
