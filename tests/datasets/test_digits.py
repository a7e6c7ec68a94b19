"""The digits loader (scikit-learn's bundled copy)."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn

pytest.importorskip("sklearn")


def test_digits_split_shapes_and_reproducibility():
    a = pn.datasets.load_digits(generator=torch.Generator().manual_seed(0))
    b = pn.datasets.load_digits(generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    assert a.X_train.shape == (1438, 64) and a.X_test.shape == (359, 64)
    assert a.n_classes == 10 and a.y_train.dtype == torch.int64
    assert float(a.X_train.min()) >= 0.0 and float(a.X_train.max()) <= 1.0
    assert b.X_train.dtype == torch.float32
    torch.testing.assert_close(a.X_train.float(), b.X_train)
    assert set(a.y_test.tolist()) <= set(range(10))


def test_digits_bad_input():
    with pytest.raises(ValueError, match="test_fraction"):
        pn.datasets.load_digits(generator=torch.Generator(), test_fraction=1.0)
    with pytest.raises(TypeError, match="generator"):
        pn.datasets.load_digits(generator=None)
