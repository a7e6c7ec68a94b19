"""Contract tests every :class:`~pnsolve.linops.LinearOperator` must pass.

Subclass :class:`LinearOperatorContract` in a pytest module, name the class
``Test…`` and implement :meth:`~LinearOperatorContract.make`; pytest then runs
every ``test_*`` method below against your operator::

    class TestMyOperator(LinearOperatorContract):
        def make(self, dtype):
            op = MyOperator(...)
            return op, op_reference_dense_matrix

The reference dense matrix is built independently of the operator's code paths.
"""

from __future__ import annotations

import torch

from .._core.errors import MissingStructureError
from ..linops.base import LinearOperator
from .tolerances import exact_tol

__all__ = ["LinearOperatorContract"]


class LinearOperatorContract:
    """Mixin of contract tests; subclasses implement :meth:`make`."""

    #: dtypes the contract is checked in.
    dtypes: tuple[torch.dtype, ...] = (torch.float64, torch.float32)
    #: whether the operator is expected to have a structured diagonal.
    has_diagonal: bool = True
    #: whether the operator is expected to have structured row access.
    has_rows: bool = True
    #: whether the operator is expected to support transposed products.
    has_transpose: bool = True

    def make(self, dtype: torch.dtype) -> tuple[LinearOperator, torch.Tensor]:
        """Return ``(operator, reference dense matrix)`` in ``dtype``."""
        raise MissingStructureError("subclasses implement make(dtype)")

    # ------------------------------------------------------------------ helpers
    def _close(self, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, n: int) -> None:
        tol = exact_tol(dtype, n)
        scale = max(float(b.abs().max()), 1.0) if b.numel() else 1.0
        err = float((a - b).abs().max()) if b.numel() else 0.0
        assert err <= tol * scale, f"max error {err:.3e} > {tol * scale:.3e}"

    def _rand(self, *shape: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=g, dtype=dtype)

    # -------------------------------------------------------------------- tests
    def test_matvec_matches_dense(self) -> None:
        for dtype in self.dtypes:
            op, D = self.make(dtype)
            x = self._rand(op.shape[1], dtype=dtype)
            y = op @ x
            assert y.shape == (op.shape[0],)
            self._close(y, D @ x, dtype, op.shape[1])

    def test_matmat_matches_dense(self) -> None:
        for dtype in self.dtypes:
            op, D = self.make(dtype)
            X = self._rand(op.shape[1], 3, dtype=dtype, seed=1)
            Y = op @ X
            assert Y.shape == (op.shape[0], 3)
            self._close(Y, D @ X, dtype, op.shape[1])
            self._close(op.matmat(X), D @ X, dtype, op.shape[1])

    def test_transposed_product(self) -> None:
        if not self.has_transpose:
            return
        for dtype in self.dtypes:
            op, D = self.make(dtype)
            X = self._rand(op.shape[0], 2, dtype=dtype, seed=2)
            self._close(op.rmatmat(X), D.mT @ X, dtype, op.shape[0])
            self._close(op.T @ X, D.mT @ X, dtype, op.shape[0])

    def test_to_dense(self) -> None:
        for dtype in self.dtypes:
            op, D = self.make(dtype)
            self._close(op.to_dense(), D, dtype, op.shape[1])

    def test_diagonal(self) -> None:
        for dtype in self.dtypes:
            op, D = self.make(dtype)
            if self.has_diagonal:
                d = op.diagonal()
                assert d.dtype == dtype
                self._close(d, torch.diagonal(D), dtype, 1)
            else:
                try:
                    op.diagonal()
                except MissingStructureError:
                    pass
                else:  # pragma: no cover - contract violation
                    raise AssertionError("expected MissingStructureError from diagonal()")

    def test_row_block(self) -> None:
        if not self.has_rows:
            return
        for dtype in self.dtypes:
            op, D = self.make(dtype)
            m = op.shape[0]
            rows = [m - 1, 0, m // 2]
            self._close(op.row_block(rows), D[rows], dtype, 1)
            self._close(op.row_block(slice(0, m, 2)), D[0:m:2], dtype, 1)

    def test_dtype_and_device_follow(self) -> None:
        for dtype in self.dtypes:
            op, D = self.make(dtype)
            assert op.dtype == dtype and op.device == D.device
            y = op @ self._rand(op.shape[1], dtype=dtype)
            assert y.dtype == dtype and y.device == D.device

    def test_inputs_not_mutated(self) -> None:
        for dtype in self.dtypes:
            op, _ = self.make(dtype)
            X = self._rand(op.shape[1], 2, dtype=dtype, seed=3)
            X0 = X.clone()
            op @ X
            op @ X[:, 0]
            assert torch.equal(X, X0)

    def test_rejects_bad_shape(self) -> None:
        op, _ = self.make(self.dtypes[0])
        bad = torch.zeros(op.shape[1] + 1, dtype=self.dtypes[0])
        try:
            op @ bad
        except ValueError as e:
            assert "shape" in str(e)
        else:  # pragma: no cover
            raise AssertionError("expected ValueError for a wrong shape")

    def test_rejects_bad_dtype(self) -> None:
        op, _ = self.make(torch.float64)
        bad = torch.zeros(op.shape[1], dtype=torch.float32)
        try:
            op @ bad
        except TypeError as e:
            assert "dtype" in str(e)
        else:  # pragma: no cover
            raise AssertionError("expected TypeError for a wrong dtype")

    def test_symmetry_flag_is_truthful(self) -> None:
        for dtype in self.dtypes:
            op, D = self.make(dtype)
            if op.is_symmetric:
                self._close(D, D.mT, dtype, 1)
