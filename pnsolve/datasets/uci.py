"""UCI regression benchmarks with the 10 standard 90/10 train/test splits.

Each data set is a folder ``<root>/<name>/`` holding ``data.csv.gz`` (comma
separated, no header, last column = target) and ``test_mask.csv.gz`` (one row per
data row, 10 columns of 0/1: column ``s`` marks the test rows of split ``s``; every
row is a test row of exactly one split). The files are MIT-licensed (see the
LICENSE next to them).

Roots are searched in this order:

1. the ``data_dir`` argument (when given, it is the only root searched);
2. the folder named by the environment variable ``PNSOLVE_DATA``;
3. the package data shipped inside pnsolve: all nine standard sets (``airfoil``,
   ``bike``, ``concrete``, ``elevators``, ``keggdirected``, ``parkinsons``, ``pol``,
   ``protein``, ``skillcraft``; about 5 MB), so every documented result reproduces
   from a clone;
4. ``shared/data/uci`` next to a source checkout of pnsolve (found by walking up
   from the package folder).

Names are case-insensitive: ``load_uci("POL")`` loads the folder ``pol``. A folder
whose name matches exactly wins over one that matches only up to case.

Nothing is cached: every call reads the files again (``protein``, 45 730 rows,
takes about 0.2 s).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from .dataset import Dataset, check_float_dtype

__all__ = ["ENV_VAR", "NUM_SPLITS", "available_uci", "load_uci", "uci_roots"]

ENV_VAR = "PNSOLVE_DATA"
NUM_SPLITS = 10
_DATA_FILE = "data.csv.gz"
_MASK_FILE = "test_mask.csv.gz"
_PACKAGE_DATA = Path(__file__).resolve().parent / "data"


def _shared_data_dir() -> Path | None:
    """``shared/data/uci`` beside the source checkout holding this package, if any."""
    package_root = Path(__file__).resolve().parent.parent  # .../pnsolve
    for parent in list(package_root.parents)[:3]:
        candidate = parent / "shared" / "data" / "uci"
        if candidate.is_dir():
            return candidate
    return None


def uci_roots(data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The folders searched for UCI data sets, in lookup order.

    Parameters
    ----------
    data_dir
        An explicit folder; when given it is the only root.

    Returns
    -------
    list of Path
        ``[data_dir]``, or ``[$PNSOLVE_DATA (if set), package data, shared checkout
        data (if present)]``.
    """
    if data_dir is not None:
        return [Path(data_dir)]
    roots: list[Path] = []
    env = os.environ.get(ENV_VAR)
    if env:
        roots.append(Path(env))
    roots.append(_PACKAGE_DATA)
    shared = _shared_data_dir()
    if shared is not None:
        roots.append(shared)
    return roots


def _names_in(root: Path) -> set[str]:
    if not root.is_dir():
        return set()
    return {p.name for p in root.iterdir() if (p / _DATA_FILE).is_file()}


def available_uci(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Names of the UCI data sets that :func:`load_uci` can find.

    Parameters
    ----------
    data_dir
        Search only this folder; by default all roots of :func:`uci_roots`.

    Returns
    -------
    list of str
        Sorted data-set names (folders holding a ``data.csv.gz``).
    """
    names: set[str] = set()
    for root in uci_roots(data_dir):
        names |= _names_in(root)
    return sorted(names)


def _check_split(split: object) -> int:
    if isinstance(split, bool) or not isinstance(split, (int, np.integer)):
        raise TypeError(f"split must be an int in 0..{NUM_SPLITS - 1}, got {split!r}")
    if not 0 <= int(split) < NUM_SPLITS:
        raise ValueError(f"split must lie in 0..{NUM_SPLITS - 1}, got {split}")
    return int(split)


def _match(root: Path, name: str) -> Path | None:
    """The folder of ``root`` named ``name``, exactly or else up to case (None if none)."""
    if not root.is_dir():
        return None
    exact = root / name
    if exact.is_dir() and exact.name in {p.name for p in root.iterdir()}:
        return exact
    folded = sorted(
        p for p in root.iterdir() if p.is_dir() and p.name.casefold() == name.casefold()
    )
    if len(folded) > 1:
        raise ValueError(
            f"UCI data set name {name!r} matches several folders in {root} up to case: "
            f"{', '.join(p.name for p in folded)}; pass the exact name"
        )
    return folded[0] if folded else None


def _locate(name: str, data_dir: str | os.PathLike[str] | None) -> Path:
    roots = uci_roots(data_dir)
    for root in roots:
        folder = _match(root, name)
        if folder is not None:
            missing = [f for f in (_DATA_FILE, _MASK_FILE) if not (folder / f).is_file()]
            if missing:
                raise FileNotFoundError(
                    f"UCI data set {name!r} in {folder} lacks {', '.join(missing)}; each data "
                    f"set folder needs {_DATA_FILE} and {_MASK_FILE}"
                )
            return folder
    searched = ", ".join(str(r) + ("" if r.is_dir() else " (missing)") for r in roots)
    hint = (
        f"pass data_dir=... or set the environment variable {ENV_VAR} to a folder "
        f"holding <name>/{_DATA_FILE} and <name>/{_MASK_FILE}"
    )
    if not any(r.is_dir() for r in roots):
        raise FileNotFoundError(f"no UCI data folder found; looked in {searched}; {hint}")
    available = available_uci(data_dir)
    raise ValueError(
        f"unknown UCI data set name {name!r}; available: {', '.join(available) or 'none'} "
        f"(looked in {searched}); {hint}"
    )


def load_uci(
    name: str,
    split: int = 0,
    data_dir: str | os.PathLike[str] | None = None,
    standardize: bool = True,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Dataset:
    """Load a UCI regression data set with one of its 10 standard train/test splits.

    Parameters
    ----------
    name
        Data-set name, case-insensitive: one of ``"airfoil"``, ``"bike"``,
        ``"concrete"``, ``"elevators"``, ``"keggdirected"``, ``"parkinsons"``,
        ``"pol"``, ``"protein"``, ``"skillcraft"`` (all shipped with pnsolve), or a
        folder under ``data_dir`` / ``$PNSOLVE_DATA``; see :func:`available_uci`.
    split
        Split index in ``0..9``; the test part is the rows marked in column ``split``
        of ``test_mask.csv.gz`` (about 10 % of the rows).
    data_dir
        Folder holding ``<name>/data.csv.gz`` and ``<name>/test_mask.csv.gz``; by
        default ``$PNSOLVE_DATA``, then the package data, then ``shared/data/uci``
        beside a source checkout.
    standardize
        Standardise every input column and the target with the *training* mean and
        standard deviation (constant columns are divided by 1, not 0).
    dtype, device
        Dtype and device of all returned tensors.

    Returns
    -------
    Dataset
        ``X_train (n_train, d)``, ``y_train (n_train,)``, ``X_test (n_test, d)``,
        ``y_test (n_test,)`` and the statistics ``x_mean, x_std (d,)``,
        ``y_mean, y_std ()``.

    Raises
    ------
    ValueError
        Unknown ``name`` (the message lists the available names) or ``split``
        outside ``0..9``.
    FileNotFoundError
        No data folder exists, or the data set's folder lacks one of its files; the
        message says where it looked and mentions ``PNSOLVE_DATA``.

    Examples
    --------
    >>> ds = load_uci("concrete", split=3)
    >>> ds.X_train.shape, ds.X_test.shape
    (torch.Size([927, 8]), torch.Size([103, 8]))
    """
    if not isinstance(name, str) or not name or "/" in name or "\\" in name:
        raise ValueError(f"name must be a data-set name such as 'pol', got {name!r}")
    split = _check_split(split)
    dtype = check_float_dtype(dtype)
    folder = _locate(name, data_dir)
    table = np.loadtxt(folder / _DATA_FILE, delimiter=",", dtype=np.float64, ndmin=2)
    mask = np.loadtxt(folder / _MASK_FILE, delimiter=",", dtype=np.int64, ndmin=2)
    if mask.shape[0] != table.shape[0]:
        raise ValueError(
            f"{folder / _MASK_FILE} has {mask.shape[0]} rows but {folder / _DATA_FILE} "
            f"has {table.shape[0]}"
        )
    if split >= mask.shape[1]:
        raise ValueError(
            f"split must lie in 0..{mask.shape[1] - 1} for {folder.name!r}, got {split}"
        )
    return Dataset.from_table(
        table,
        mask[:, split] != 0,
        name=folder.name,
        split=split,
        standardize=standardize,
        dtype=dtype,
        device=device,
        source=str(folder),
    )
