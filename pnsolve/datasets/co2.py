"""Mauna Loa atmospheric CO2: monthly means 1958-2001, shipped as package data.

The series of scikit-learn's example "Forecasting of CO2 level on Mona Loa dataset
using Gaussian process regression" (after Rasmussen & Williams, *Gaussian Processes
for Machine Learning*, section 5.4.3), prepared the same way: the weekly record
averaged over calendar months, months without data dropped, time as
``year + month / 12``.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .csv import _read_table
from .dataset import check_float_dtype
from .sampling import output_device

__all__ = ["CO2_FILE", "mauna_loa_co2"]

CO2_FILE = Path(__file__).resolve().parent / "data" / "co2" / "monthly.csv.gz"


def mauna_loa_co2(
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Monthly mean atmospheric CO2 at Mauna Loa Observatory, March 1958 to December 2001.

    The data are the Scripps Institution of Oceanography (C. D. Keeling) weekly record
    of CO2 in continuous air samples at Mauna Loa Observatory, Hawaii, as distributed
    by CDIAC (Oak Ridge National Laboratory) and bundled with statsmodels 0.15.0
    (``statsmodels/datasets/co2/co2.csv``; public domain). The 2225 non-empty weekly
    values (1958-03-29 to 2001-12-29) are grouped by the calendar month of their date
    and averaged; the five months without any value (1958-06, 1958-10, 1964-02 to
    1964-04) are dropped. This matches scikit-learn's CO2 example
    (``resample("ME").mean().dropna()``). Full provenance:
    ``pnsolve/datasets/data/co2/SOURCE.txt``.

    Parameters
    ----------
    dtype
        Floating dtype of both tensors.
    device
        Device of both tensors (``None``: torch's default device).

    Returns
    -------
    X : torch.Tensor
        Shape ``(521, 1)``: time in years, ``year + month / 12`` (scikit-learn's
        convention, so March 1958 is ``1958.25`` and December 2001 is ``2002.0``),
        strictly increasing.
    y : torch.Tensor
        Shape ``(521,)``: the monthly mean CO2 concentration in ppm (about 313-372).
        Not centred; scikit-learn's example subtracts ``y.mean()`` before fitting.

    Raises
    ------
    TypeError
        ``dtype`` is not a floating dtype.
    ValueError
        The shipped file is damaged (not gzip, non-numeric or not two columns).

    Examples
    --------
    >>> X, y = mauna_loa_co2()
    >>> X.shape, y.shape
    (torch.Size([521, 1]), torch.Size([521]))
    """
    dtype = check_float_dtype(dtype)
    table, _ = _read_table(CO2_FILE, ",")
    if table.ndim != 2 or table.shape[1] != 2:
        raise ValueError(f"{CO2_FILE} must have 2 columns (year_fraction, co2_ppm)")
    data = torch.from_numpy(table).to(device=output_device(device), dtype=dtype)
    return data[:, :1].contiguous(), data[:, 1].contiguous()
