"""Dense (stored) matrices as operators, with a two-thread product for large CPU matrices."""

from __future__ import annotations

import numpy as np
import torch

from .._core.row_halves import in_two_halves, may_split
from .._core.validation import check_tensor
from .base import LinearOperator
from .symmetry import check_finite_symmetric

__all__ = [
    "FAST_COLUMNS",
    "FAST_MIN_ELEMENTS",
    "NUMPY_MAX_BYTES",
    "NUMPY_MIN_ELEMENTS",
    "Dense",
    "dense_matmat",
]

#: Smallest matrix (``m · n`` entries) that takes the row-split product (n ≈ 2 000).
FAST_MIN_ELEMENTS = 2_000 * 2_000
#: Numbers of right-hand columns ``k`` that take it, per dtype (each column is one
#: ``torch.mv`` per half): where it measured faster than torch's ``A @ X``.
FAST_COLUMNS: dict[torch.dtype, range] = {torch.float64: range(1, 3), torch.float32: range(1, 5)}


#: Matrices from ``NUMPY_MIN_ELEMENTS`` entries up to ``NUMPY_MAX_BYTES`` multiply
#: through NumPy's BLAS (OpenBLAS, both cores): where they sit in or near the last-level
#: cache (32 MiB here) it ran 1.1–4× faster than the row split or torch's ``gemv``.
NUMPY_MIN_ELEMENTS = 1_000 * 1_000
NUMPY_MAX_BYTES = 128 * 2**20


def _eligible(matrix: torch.Tensor, X: torch.Tensor) -> bool:
    """CPU, contiguous, same dtype, few columns, plain tensors, two torch threads."""
    return (
        matrix.device.type == "cpu"
        and X.dtype == matrix.dtype
        and X.shape[1] in FAST_COLUMNS.get(matrix.dtype, ())
        and X.device.type == "cpu"
        and matrix.shape[0] >= 2
        and matrix.is_contiguous()
        and may_split(matrix, X)
    )


def _numpy_size(matrix: torch.Tensor) -> bool:
    """From :data:`NUMPY_MIN_ELEMENTS` entries up to :data:`NUMPY_MAX_BYTES`."""
    size = matrix.numel()
    return NUMPY_MIN_ELEMENTS <= size and size * matrix.element_size() <= NUMPY_MAX_BYTES


def _product_path(matrix: torch.Tensor, X: torch.Tensor) -> str:
    """How :func:`dense_matmat` multiplies: ``"numpy"``, ``"split"`` or ``"torch"``."""
    if not _eligible(matrix, X):
        return "torch"
    if _numpy_size(matrix):
        return "numpy"
    return "split" if matrix.numel() >= FAST_MIN_ELEMENTS else "torch"


def dense_matmat(matrix: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """``matrix @ X`` for a stored ``matrix`` of shape ``(m, n)`` and ``X`` of shape ``(n, k)``.

    Contiguous CPU matrices without autograd, with ``k`` in :data:`FAST_COLUMNS`
    (float64: 1–2, float32: 1–4) and at least two torch threads, take one of two
    paths. From :data:`NUMPY_MIN_ELEMENTS` entries up to :data:`NUMPY_MAX_BYTES`
    (float64 up to ``n ≈ 4 100``), NumPy's ``@`` on the shared memory (OpenBLAS, which
    runs on both cores and keeps such matrices in cache; it uses its own threads, set
    by ``OPENBLAS_NUM_THREADS``). Larger ones (from :data:`FAST_MIN_ELEMENTS`) are
    split into two row
    halves, multiplied by ``torch.mv`` column by column, one half on a worker thread:
    torch's MKL ``gemv`` uses one core at these sizes, and its ``gemm`` with a few
    columns runs far slower than ``k`` matrix–vector products (measured numbers in
    :class:`Dense`). Everything else (GPU, autograd, functorch transforms, half
    precision, small matrices, many columns) is ``matrix @ X``. The two paths agree
    to rounding (``exact_tol``); returns shape ``(m, k)``.
    """
    path = _product_path(matrix, X)  # decided once per product
    if path == "torch":
        return matrix @ X
    if path == "numpy":
        # one matrix-vector product per column: OpenBLAS's gemm with 2-4 columns ran
        # 1.2-2.3x slower than that many gemv (n = 1 000-4 000, 2026-11-29)
        An, Xn = matrix.numpy(), X.numpy()
        if Xn.shape[1] == 1:
            return torch.from_numpy(An @ Xn[:, 0]).to(device=matrix.device).unsqueeze(1)
        cols = [An @ np.ascontiguousarray(Xn[:, j]) for j in range(Xn.shape[1])]
        return torch.from_numpy(np.stack(cols, axis=1)).to(device=matrix.device)
    cols = [X[:, j].contiguous() for j in range(X.shape[1])]
    high, low = in_two_halves(lambda rows: [torch.mv(matrix[rows], x) for x in cols], len(matrix))
    return torch.stack([torch.cat(pair) for pair in zip(high, low, strict=True)], dim=1)


class Dense(LinearOperator):
    """A stored matrix ``A`` of shape ``(m, n)``.

    Products ``A @ X`` (``X`` of shape ``(n, k)``) go through :func:`dense_matmat`:
    the rule is *CPU, contiguous, no autograd, at least two torch threads, ``k ≤ 2``
    in float64 or ``k ≤ 4`` in float32; from 10⁶ entries up to 128 MiB NumPy's BLAS,
    above that (from ``m · n ≥ 4·10⁶``) two row halves on two threads, one
    ``torch.mv`` per column*; otherwise torch's own ``A @ X``.

    NumPy's BLAS against the row split (torch's ``gemv`` below 4·10⁶ entries), one
    column, measured idle 2026-11-29 (interleaved medians; time ÷ the split's):

    ======= ====== ====== ====== ====== ====== ====== ======
    dtype   1 000  2 000  3 000  4 000  5 000  10 000 20 000
    ======= ====== ====== ====== ====== ====== ====== ======
    float64  0.41   0.32   0.87   0.94   1.01   1.13   1.12
    float32  0.37   0.26   0.33   0.78   0.92   1.13   1.15
    ======= ====== ====== ====== ====== ====== ====== ======

    ``pn.cg`` at ``n = 2 000`` went from 1.31 to 0.79 ms per iteration with it (SciPy's
    ``cg`` 0.61). The row split, measured 2026-11-28
    with ``benchmarks/bench_cg.py --products`` (2-core CPU shared with other jobs,
    load average 3.4–4.4, interleaved medians of 7; time ÷ torch's ``A @ X``; torch's
    ``gemm`` with 2–4 columns was 3–30× slower than ``gemv`` there):

    ======= ====== ===== ===== ===== ======
    dtype   n      k = 1 k = 2 k = 4 k = 16
    ======= ====== ===== ===== ===== ======
    float64  2 000 0.63  0.69  1.15  1.01
    float64  5 000 0.71  0.84  1.41  1.12
    float64 10 000 0.73  0.75  1.44  1.00
    float64 20 000 0.61  0.53  1.01  0.99
    float32  2 000 1.46  0.08  0.12  1.02
    float32  5 000 1.15  0.28  0.53  0.98
    float32 10 000 1.24  0.31  0.60  1.00
    float32 20 000 0.76  0.43  0.80  0.99
    ======= ====== ===== ===== ===== ======

    The run split every k ≤ 4 in both dtypes; the rule keeps the cells below 1.
    k = 16 was never split (both columns are torch's product: the noise level).
    Float32 with one column, above 1 under that load, measured 0.80–0.86 idle
    (2026-11-29, load average 0.4; float64 0.70–0.82 there), so it is split too.

    The split needs the second core free. After an OpenMP parallel region (torch's
    element-wise kernels above about 32 768 entries, MKL's threaded BLAS ``dot``),
    libgomp's workers spin for about 5 ms before they sleep (measured: 5.5 ms of CPU
    time in a 20 ms pause after one ``torch.dot`` of 5 000 entries), and a product
    started meanwhile runs at one-thread speed. The solvers' per-iteration work avoids
    such regions: the CG policy's conjugation used a BLAS ``dot`` until 2026-11-29,
    and PLS iterations at ``n = 5 000`` took 14.3 ms with it and 10.1 ms without.

    Parameters
    ----------
    matrix
        Floating tensor of shape ``(m, n)``; it is referenced, not copied.
    is_symmetric, is_psd
        Structural flags. ``is_symmetric=None`` checks NaN/Inf and symmetry for
        square matrices with :func:`~pnsolve.linops.symmetry.check_finite_symmetric`
        (exact below 1 024 rows; above, a two-vector probe costing two products, which
        may accept asymmetries below about ``32 eps √n ‖A‖_F`` in Frobenius norm).
    """

    def __init__(
        self,
        matrix: torch.Tensor,
        *,
        is_symmetric: bool | None = None,
        is_psd: bool = False,
    ) -> None:
        matrix = check_tensor(matrix, "matrix")
        if matrix.ndim != 2:
            raise ValueError(f"matrix must have shape (m, n), got {tuple(matrix.shape)}")
        if not matrix.is_floating_point():
            raise TypeError(f"matrix must have a floating dtype, got {matrix.dtype}")
        if is_symmetric is None:  # one pass: NaN/Inf (else it would read as non-symmetric)
            is_symmetric = check_finite_symmetric(matrix, "the matrix")
        super().__init__(
            tuple(matrix.shape),
            matrix.dtype,
            matrix.device,
            is_symmetric=is_symmetric,
            is_psd=is_psd,
        )
        self.matrix = matrix

    def _to(self, dtype: torch.dtype) -> Dense:
        return Dense(self.matrix.to(dtype), is_symmetric=self.is_symmetric, is_psd=self.is_psd)

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return dense_matmat(self.matrix, X)

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.matrix.mT @ X

    def _diagonal(self) -> torch.Tensor:
        return torch.diagonal(self.matrix)

    def _row_block(self, rows: torch.Tensor) -> torch.Tensor:
        return self.matrix[rows]

    def to_dense(self) -> torch.Tensor:
        """The stored matrix itself (no copy)."""
        return self.matrix
