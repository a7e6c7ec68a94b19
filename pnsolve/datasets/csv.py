"""Load a user's numeric CSV file (plain or gzip) as a :class:`Dataset`."""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import numpy as np
import torch

from .dataset import Dataset, check_float_dtype

__all__ = ["load_csv"]

_CANDIDATE_DELIMITERS = (",", ";", "\t")


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def _guess_delimiter(line: str) -> str | None:
    for delim in _CANDIDATE_DELIMITERS:
        if delim in line:
            return delim
    return None  # whitespace


def _split(line: str, delimiter: str | None) -> list[str]:
    return [f.strip() for f in (line.split(delimiter) if delimiter else line.split())]


def _parse_row(fields: list[str]) -> list[float] | None:
    try:
        return [float(f) for f in fields]
    except ValueError:
        return None


def _read_table(path: Path, delimiter: str | None) -> tuple[np.ndarray, bool]:
    """Parse ``path`` into a float array; returns the array and whether a header was skipped.

    A ``.gz`` file that is not valid gzip and a file that is not UTF-8 text raise
    ``ValueError`` naming the file, as does a NaN or infinite value (naming the line).
    """
    try:
        return _parse_table(path, delimiter)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise ValueError(
            f"{path} is not a valid gzip file ({exc}); a .gz suffix needs gzip-compressed text"
        ) from exc
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path} is not UTF-8 text (byte {exc.start}); give a numeric CSV file"
            + (" or its gzip-compressed .gz form" if path.suffix != ".gz" else "")
        ) from exc


def _parse_table(path: Path, delimiter: str | None) -> tuple[np.ndarray, bool]:
    rows: list[list[float]] = []
    width: int | None = None
    header = False
    with _open_text(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if delimiter is None and width is None:
                delimiter = _guess_delimiter(line)
            fields = _split(line, delimiter)
            values = _parse_row(fields)
            if values is None:
                if width is None and not header and not rows:
                    header, width = True, len(fields)  # first line with a non-number: header
                    continue
                bad = next(f for f in fields if _parse_row([f]) is None)
                raise ValueError(
                    f"{path}, line {lineno}: could not parse {bad!r} as a number; every "
                    "row after an optional header must be numeric"
                )
            if width is None:
                width = len(values)
            if len(values) != width:
                raise ValueError(
                    f"{path}, line {lineno}: expected {width} columns, found {len(values)}"
                )
            if not all(math.isfinite(v) for v in values):
                bad = next(f for f, v in zip(fields, values, strict=True) if not math.isfinite(v))
                raise ValueError(
                    f"{path}, line {lineno}: non-finite value {bad!r}; every value must be a "
                    "finite number (remove or impute missing values)"
                )
            rows.append(values)
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), width or 0), header


def load_csv(
    path: str | os.PathLike[str],
    *,
    test_fraction: float = 0.1,
    split_seed: int = 0,
    standardize: bool = True,
    delimiter: str | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Dataset:
    """Load a numeric table whose last column is the target and split it at random.

    Parameters
    ----------
    path
        A ``.csv`` / ``.txt`` file or its gzip-compressed ``.gz`` form. Blank lines
        and lines starting with ``#`` are skipped; a first line holding a
        non-numeric field is taken as a header.
    test_fraction
        Fraction of rows in the test part, in ``(0, 1)``; at least one row goes to
        each part.
    split_seed
        Seed of the ``torch.Generator`` drawing the permutation; the same seed gives
        the same split.
    standardize
        Standardise inputs and target with training statistics (as :func:`load_uci`).
    delimiter
        Field separator; ``None`` guesses from the first line (``,`` then ``;`` then
        tab, else any whitespace).
    dtype, device
        Dtype and device of the returned tensors.

    Returns
    -------
    Dataset
        With ``name`` the file name without suffixes and ``split = split_seed``;
        shapes as in :func:`load_uci`.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        A non-numeric, NaN or infinite value or a ragged row (the message names the
        file and line), a ``.gz`` file that is not gzip or a file that is not UTF-8
        text (naming the file), fewer than 2 rows or 2 columns, or ``test_fraction``
        outside ``(0, 1)``.
    """
    path = Path(path)
    dtype = check_float_dtype(dtype)
    if not isinstance(test_fraction, (int, float)) or not 0 < float(test_fraction) < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    if isinstance(split_seed, bool) or not isinstance(split_seed, (int, np.integer)):
        raise TypeError(f"split_seed must be an int, got {split_seed!r}")
    if not path.is_file():
        raise FileNotFoundError(f"path {str(path)!r} is not a file")
    table, _ = _read_table(path, delimiter)
    n, cols = table.shape
    if cols < 2:
        raise ValueError(
            f"{path} has {cols} column(s); need at least one input column and the target "
            "(the last column)"
        )
    if n < 2:
        raise ValueError(f"{path} has {n} data row(s); need at least 2 (train and test)")
    n_test = min(n - 1, max(1, round(float(test_fraction) * n)))
    # a seeded CPU generator and a host permutation: it indexes a NumPy mask
    gen = torch.Generator(device="cpu").manual_seed(int(split_seed))
    perm = torch.randperm(n, generator=gen, device=gen.device)
    test_rows = np.zeros(n, dtype=bool)
    test_rows[perm[:n_test].numpy()] = True
    name = path.name.removesuffix(".gz")
    name = name.rsplit(".", 1)[0] if "." in name else name
    return Dataset.from_table(
        table,
        test_rows,
        name=name,
        split=int(split_seed),
        standardize=standardize,
        dtype=dtype,
        device=device,
        source=str(path),
    )
