"""The typed result of every pnsolve data loader: a train/test split with its standardisation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .sampling import output_device

__all__ = ["Dataset"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A regression data set split into a training and a test part.

    Attributes
    ----------
    X_train, y_train
        Training inputs of shape ``(n_train, d)`` and targets of shape ``(n_train,)``.
    X_test, y_test
        Test inputs of shape ``(n_test, d)`` and targets of shape ``(n_test,)``.
    name
        Name of the data set (UCI name or the CSV file's stem).
    split
        Index of the standard split (UCI) or the ``split_seed`` (CSV).
    x_mean, x_std
        Per-column statistics of shape ``(d,)`` computed on the *training* inputs;
        ``X = (X_raw − x_mean) / x_std``. Constant columns get ``x_std = 1``.
        With ``standardize=False`` they are zeros and ones (the identity map).
    y_mean, y_std
        Scalar tensors (shape ``()``), the training targets' mean and standard
        deviation, or 0 and 1 with ``standardize=False``. Predictions ``μ`` on the
        standardised scale map back as ``y_mean + y_std · μ``.
    source
        Where the data was read from (a folder or a file path).

    Notes
    -----
    Statistics use the population standard deviation (``correction=0``), so the
    standardised training part has mean 0 and standard deviation 1 exactly up to rounding.
    """

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    name: str
    split: int
    x_mean: torch.Tensor
    x_std: torch.Tensor
    y_mean: torch.Tensor
    y_std: torch.Tensor
    source: str = ""

    @property
    def n_train(self) -> int:
        """Number of training rows."""
        return int(self.X_train.shape[0])

    @property
    def n_test(self) -> int:
        """Number of test rows."""
        return int(self.X_test.shape[0])

    @property
    def d(self) -> int:
        """Number of input columns."""
        return int(self.X_train.shape[1])

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, split={self.split}, n_train={self.n_train}, "
            f"n_test={self.n_test}, d={self.d}, dtype={self.X_train.dtype}, "
            f"device={self.X_train.device})"
        )

    @classmethod
    def from_table(
        cls,
        table: np.ndarray,
        test_rows: np.ndarray,
        *,
        name: str,
        split: int,
        standardize: bool,
        dtype: torch.dtype,
        device: torch.device | str | None,
        source: str = "",
    ) -> Dataset:
        """Split a numeric table whose last column is the target.

        Parameters
        ----------
        table
            Float array of shape ``(n, d + 1)``; the last column is the target.
        test_rows
            Boolean array of shape ``(n,)``, true for test rows.
        name, split, source
            Stored on the result.
        standardize
            Whether to standardise inputs and targets with training statistics.
        dtype, device
            Dtype and device of every returned tensor. Statistics are computed in
            float64 before the cast.

        Returns
        -------
        Dataset
        """
        table = np.asarray(table, dtype=np.float64)
        test_rows = np.asarray(test_rows, dtype=bool)
        if table.ndim != 2 or table.shape[1] < 2:
            raise ValueError(
                f"table must have shape (n, d + 1) with d ≥ 1, got {table.shape} for {name!r}"
            )
        if test_rows.shape != (table.shape[0],):
            raise ValueError(
                f"test_rows must have shape ({table.shape[0]},), got {test_rows.shape}"
            )
        if test_rows.all() or not test_rows.any():
            raise ValueError(f"split {split} of {name!r} leaves an empty training or test part")
        target = output_device(device)
        data = torch.from_numpy(table).to(target)
        mask = torch.from_numpy(test_rows).to(target)
        X, y = data[:, :-1], data[:, -1]
        X_train, y_train, X_test, y_test = X[~mask], y[~mask], X[mask], y[mask]
        d = X.shape[1]
        if standardize:
            x_mean = X_train.mean(dim=0)
            x_std = _safe_std(X_train.std(dim=0, correction=0))
            y_mean = y_train.mean()
            y_std = _safe_std(y_train.std(correction=0))
        else:
            x_mean, x_std = X.new_zeros(d), X.new_ones(d)
            y_mean, y_std = y.new_zeros(()), y.new_ones(())

        def cast(t: torch.Tensor) -> torch.Tensor:
            return t.to(dtype=dtype).contiguous()

        return cls(
            X_train=cast((X_train - x_mean) / x_std),
            y_train=cast((y_train - y_mean) / y_std),
            X_test=cast((X_test - x_mean) / x_std),
            y_test=cast((y_test - y_mean) / y_std),
            name=name,
            split=split,
            x_mean=cast(x_mean),
            x_std=cast(x_std),
            y_mean=cast(y_mean),
            y_std=cast(y_std),
            source=source,
        )


def _safe_std(std: torch.Tensor) -> torch.Tensor:
    """Replace zero (constant-column) standard deviations by one."""
    return torch.where(std > 0, std, torch.ones_like(std))


def check_float_dtype(dtype: object, name: str = "dtype") -> torch.dtype:
    """Require a floating ``torch.dtype``; the error names ``name``."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating torch.dtype, got {dtype!r}")
    return dtype
