"""The Mauna Loa CO2 loader: shapes, dtype and device, the documented rows, the annual cycle."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.datasets import co2

N_ROWS = 521
#: (year, month) without any weekly value, dropped from the monthly series.
MISSING = {(1958, 6), (1958, 10), (1964, 2), (1964, 3), (1964, 4)}


def _year_month(X: torch.Tensor) -> list[tuple[int, int]]:
    """Invert ``year + month / 12`` (December is ``year + 1.0``)."""
    twelfths = torch.round(X[:, 0] * 12).to(torch.int64).tolist()
    return [((t - 1) // 12, (t - 1) % 12 + 1) for t in twelfths]


def test_shapes_dtype_and_export():
    X, y = pn.datasets.mauna_loa_co2()
    assert X.shape == (N_ROWS, 1) and y.shape == (N_ROWS,)
    assert X.dtype == torch.float64 and y.dtype == torch.float64
    assert X.is_contiguous() and y.is_contiguous()
    assert "mauna_loa_co2" in pn.datasets.__all__
    assert co2.CO2_FILE.is_file() and co2.CO2_FILE.name == "monthly.csv.gz"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_and_device_follow_arguments(dtype):
    X, y = pn.datasets.mauna_loa_co2(dtype=dtype, device="meta")
    assert X.dtype == dtype and y.dtype == dtype
    assert X.device.type == "meta" and y.device.type == "meta"
    assert X.shape == (N_ROWS, 1) and y.shape == (N_ROWS,)
    X64, y64 = pn.datasets.mauna_loa_co2()
    X_cpu, y_cpu = pn.datasets.mauna_loa_co2(dtype=dtype, device="cpu")
    torch.testing.assert_close(X_cpu, X64.to(dtype))
    torch.testing.assert_close(y_cpu, y64.to(dtype))


def test_device_none_is_torch_default_device():
    with torch.device("meta"):
        X, y = pn.datasets.mauna_loa_co2()
    assert X.device.type == "meta" and y.device.type == "meta"


def test_rejects_non_float_dtype():
    with pytest.raises(TypeError, match="dtype"):
        pn.datasets.mauna_loa_co2(dtype=torch.int64)


def test_time_axis_is_monthly_and_increasing():
    X, _ = pn.datasets.mauna_loa_co2()
    t = X[:, 0]
    assert bool((t[1:] > t[:-1]).all())
    steps = torch.diff(t) * 12
    torch.testing.assert_close(steps, torch.round(steps), atol=1e-9, rtol=0)
    months = _year_month(X)
    assert len(set(months)) == N_ROWS
    # the convention year + month / 12: March 1958 is 1958.25, December 2001 is 2002.0
    assert months[0] == (1958, 3) and float(t[0]) == 1958.25
    assert months[-1] == (2001, 12) and float(t[-1]) == 2002.0
    spanned = {(yr, m) for yr in range(1958, 2002) for m in range(1, 13) if (yr, m) >= (1958, 3)}
    assert spanned - set(months) == MISSING


def test_values_documented_and_physical():
    _, y = pn.datasets.mauna_loa_co2()
    assert bool(torch.isfinite(y).all())
    assert 310.0 < float(y.min()) and float(y.max()) < 430.0
    assert float(y[0]) == pytest.approx(316.1, abs=1e-12)  # March 1958: one weekly value
    assert float(y[-1]) == pytest.approx(371.02, abs=1e-12)  # December 2001: five weeks
    # rising CO2: the last decade's mean exceeds the first decade's by over 30 ppm
    assert float(y[-120:].mean() - y[:120].mean()) > 30.0


def test_annual_cycle_peaks_in_may_and_bottoms_in_october():
    X, y = pn.datasets.mauna_loa_co2()
    t = X[:, 0] - X[:, 0].mean()
    basis = torch.stack([torch.ones_like(t), t, t**2, t**3], dim=1)
    coef = torch.linalg.lstsq(basis, y[:, None]).solution
    resid = y - (basis @ coef)[:, 0]
    month = torch.tensor([m for _, m in _year_month(X)])
    may, october = resid[month == 5].mean(), resid[month == 10].mean()
    # the seasonal swing at Mauna Loa is about 6 ppm peak to trough
    assert float(may - october) > 4.0
    assert int(torch.argmax(torch.stack([resid[month == m].mean() for m in range(1, 13)]))) == 4
