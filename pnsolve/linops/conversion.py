"""Conversion of array-likes and foreign operators to :class:`LinearOperator`."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._core.validation import check_finite, check_real_dtype
from .base import LinearOperator
from .closure import Closure
from .dense import Dense
from .symmetry import check_finite_symmetric

__all__ = ["as_linop"]


def as_linop(
    obj: object,
    *,
    is_symmetric: bool | None = None,
    is_psd: bool = False,
    name: str = "obj",
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
    name
        How error messages call ``obj`` (e.g. ``"A"``).

    Returns
    -------
    LinearOperator
        Products follow the dtype (and, for torch inputs, the device) of ``obj``.
        NumPy and SciPy inputs give CPU operators; integer and boolean arrays become
        float64. Stored matrices (dense or sparse, torch, NumPy or SciPy) are checked
        for NaN/Inf and, unless ``is_symmetric`` is given, for symmetry (dense tensors
        and arrays by :func:`~pnsolve.linops.symmetry.check_finite_symmetric`: exact
        below 1 024 rows, a two-product probe above).

    Raises
    ------
    TypeError
        If ``obj`` is none of the above (the message names the type), or complex, or
        in half precision (float16/bfloat16): pnsolve computes in float32 or float64.
    ValueError
        If ``obj`` is not two-dimensional or a stored matrix holds NaN/Inf.
    """
    if isinstance(obj, LinearOperator):
        return obj
    if isinstance(obj, torch.Tensor):
        return _from_tensor(obj, is_symmetric, is_psd, name)
    if isinstance(obj, np.ndarray):
        arr = _real_numpy(obj, name)
        return _from_tensor(torch.from_numpy(np.ascontiguousarray(arr)), is_symmetric, is_psd, name)
    try:
        import scipy.sparse as sp
        import scipy.sparse.linalg as spla
    except ImportError:  # pragma: no cover - scipy is a hard dependency
        sp = spla = None
    if sp is not None and sp.issparse(obj):
        sparse: Any = obj  # a scipy sparse matrix or array (scipy ships no type stubs)
        mat = sparse.tocsr()
        if not np.issubdtype(mat.dtype, np.floating) or mat.dtype == np.float16:
            mat = mat.astype(_real_numpy(np.zeros(0, dtype=mat.dtype), name).dtype)
        if mat.nnz and not np.isfinite(mat.data).all():
            bad = "NaN" if np.isnan(mat.data).any() else "Inf"
            raise ValueError(f"{name} contains {bad} values")
        sym = bool(is_symmetric) if is_symmetric is not None else _sparse_symmetric(mat)
        return _from_scipy_callable(
            mat.shape, mat.dtype, mat.__matmul__, mat.T.__matmul__, mat.diagonal, sym, is_psd
        )
    if spla is not None and isinstance(obj, spla.LinearOperator):
        dtype = np.dtype(obj.dtype) if obj.dtype is not None else np.dtype(np.float64)
        dtype = _real_numpy(np.zeros(0, dtype=dtype), name).dtype
        return _from_scipy_callable(
            obj.shape, dtype, obj.matmat, obj.rmatmat, None, bool(is_symmetric), is_psd
        )
    raise TypeError(
        f"as_linop: {name} must be a pnsolve LinearOperator, a torch.Tensor, a numpy "
        f"array, a scipy sparse matrix or a scipy LinearOperator; got {type(obj).__name__}"
    )


def _real_numpy(arr: np.ndarray, name: str) -> np.ndarray:
    """``arr`` with a real floating dtype: complex and float16 refused, integers → float64."""
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(
            f"{name} must be real, got {arr.dtype}: pnsolve solves real symmetric systems "
            "(a complex input is never cast silently)"
        )
    if arr.dtype == np.float16:
        raise TypeError(
            f"{name} has unsupported dtype float16: pnsolve computes in float32 or float64 "
            f"(cast it, e.g. {name}.astype(np.float32))"
        )
    return arr if np.issubdtype(arr.dtype, np.floating) else arr.astype(np.float64)


def _from_tensor(
    t: torch.Tensor, is_symmetric: bool | None, is_psd: bool, name: str
) -> LinearOperator:
    if t.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {tuple(t.shape)}")
    check_real_dtype(t.dtype, name)
    if not t.is_floating_point():
        t = t.to(torch.float64)
    if t.layout != torch.strided:
        sparse = t.coalesce() if t.layout == torch.sparse_coo else t.to_sparse_coo().coalesce()
        check_finite(sparse.values(), name)
        sparse_t = sparse.t().coalesce()
        if is_symmetric is None:
            is_symmetric = _torch_sparse_symmetric(sparse, sparse_t)
        return Closure(
            lambda X: sparse @ X,
            (int(t.shape[0]), int(t.shape[1])),
            dtype=t.dtype,
            device=t.device,
            rmatmat=lambda X: sparse_t @ X,
            is_symmetric=bool(is_symmetric),
            is_psd=is_psd,
        )
    if is_symmetric is None:  # one pass: NaN/Inf (else "not symmetric") and symmetry
        is_symmetric = check_finite_symmetric(t, name)
    return Dense(t, is_symmetric=is_symmetric, is_psd=is_psd)


def _torch_sparse_symmetric(sparse: torch.Tensor, sparse_t: torch.Tensor) -> bool:
    """Whether a coalesced sparse COO matrix equals its transpose to rounding."""
    if sparse.shape[0] != sparse.shape[1]:
        return False
    values = sparse.values()
    if values.numel() == 0:
        return True
    diff = (sparse - sparse_t).coalesce().values()
    scale = float(values.abs().max())
    tol = 100 * torch.finfo(values.dtype).eps * scale
    return diff.numel() == 0 or float(diff.abs().max()) <= tol


def _from_scipy_callable(shape, np_dtype, mat, rmat, diag, symmetric: bool, is_psd: bool):
    torch_dtype = torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype

    def run(fn, X: torch.Tensor) -> torch.Tensor:
        # host round trip: SciPy computes in NumPy; the result goes back to X's device
        out = np.asarray(fn(X.detach().cpu().numpy()))
        if out.ndim == 1:
            out = out[:, None]
        return torch.from_numpy(np.ascontiguousarray(out, dtype=np_dtype)).to(X.device)

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
