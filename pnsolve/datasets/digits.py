"""The handwritten-digits classification data bundled with scikit-learn (optional dependency)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core import random as rnd
from .dataset import check_float_dtype
from .sampling import output_device, require_generator

__all__ = ["ClassificationData", "load_digits"]


@dataclass(frozen=True, eq=False)
class ClassificationData:
    """A labelled classification data set split into training and test parts.

    Attributes
    ----------
    X_train, y_train
        Inputs ``(n_train, d)`` and int64 labels ``(n_train,)`` in ``0..C−1``.
    X_test, y_test
        Inputs ``(n_test, d)`` and labels ``(n_test,)``.
    n_classes
        Number of classes ``C``.
    name
        Name of the data set.
    """

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    name: str


def load_digits(
    *,
    generator: torch.Generator,
    test_fraction: float = 0.2,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> ClassificationData:
    """The UCI optical-recognition digits (1797 8×8 images, 10 classes) from scikit-learn.

    Pixel intensities (0–16) are scaled to ``[0, 1]``; the rows are split at random
    into training and test parts with the explicit ``generator``.

    Parameters
    ----------
    generator
        Randomness of the split.
    test_fraction
        Fraction of rows in the test part, in ``(0, 1)``.
    dtype, device
        Of the returned inputs.

    Raises
    ------
    ImportError
        If scikit-learn is not installed (``pip install scikit-learn``; it is part of
        the ``dev`` and ``peers`` extras).
    """
    require_generator(generator)
    check_float_dtype(dtype)
    if not (isinstance(test_fraction, float) and 0.0 < test_fraction < 1.0):
        raise ValueError(f"test_fraction must be a float in (0, 1), got {test_fraction!r}")
    try:
        from sklearn.datasets import load_digits as _sk_load_digits
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "load_digits needs scikit-learn (its bundled copy of the digits data): "
            "pip install scikit-learn"
        ) from exc
    raw = _sk_load_digits()
    target = output_device(device)
    X = torch.as_tensor(raw.data, dtype=dtype, device=target) / 16.0
    y = torch.as_tensor(raw.target, dtype=torch.int64, device=target)
    perm = rnd.randperm(X.shape[0], generator=generator, device=target)
    n_test = max(1, round(test_fraction * X.shape[0]))
    test, train = perm[:n_test], perm[n_test:]
    return ClassificationData(
        X_train=X[train],
        y_train=y[train],
        X_test=X[test],
        y_test=y[test],
        n_classes=10,
        name="digits",
    )
