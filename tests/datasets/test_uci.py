"""UCI loaders: shapes against the masks, standardisation from training data, lookup, errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

import pnsolve as pn
from pnsolve.datasets import uci
from pnsolve.testing import exact_tol

SHARED = uci._shared_data_dir()
SHARED_NAMES = sorted(p.name for p in SHARED.iterdir() if p.is_dir()) if SHARED else []
needs_shared = pytest.mark.skipif(SHARED is None, reason="no shared/data/uci beside the checkout")


def _raw(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    table = np.loadtxt(folder / "data.csv.gz", delimiter=",", ndmin=2)
    mask = np.loadtxt(folder / "test_mask.csv.gz", delimiter=",", dtype=np.int64, ndmin=2)
    return table, mask


def _write_dataset(root: Path, name: str, table: np.ndarray, mask: np.ndarray) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    with gzip.open(folder / "data.csv.gz", "wt") as fh:
        np.savetxt(fh, table, delimiter=",")
    with gzip.open(folder / "test_mask.csv.gz", "wt") as fh:
        np.savetxt(fh, mask, delimiter=",", fmt="%d")
    return folder


def _toy(n: int = 20, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    table = rng.normal(size=(n, d + 1))
    mask = np.zeros((n, 10), dtype=np.int64)
    mask[np.arange(n), np.arange(n) % 10] = 1
    return table, mask


def _assert_standardised(X: torch.Tensor, y: torch.Tensor) -> None:
    n = X.shape[0]
    tol = exact_tol(X.dtype, n) * (1.0 + float(X.abs().max()))
    assert float(X.mean(0).abs().max()) <= tol
    std = X.std(0, correction=0)
    constant = std <= tol
    assert bool(((std[~constant] - 1).abs() <= tol).all())
    assert abs(float(y.mean())) <= tol
    assert abs(float(y.std(correction=0)) - 1) <= tol


@needs_shared
@pytest.mark.parametrize("name", SHARED_NAMES)
def test_every_shared_dataset_split0_matches_masks(name):
    table, mask = _raw(SHARED / name)
    test_rows = mask[:, 0] != 0
    raw = pn.datasets.load_uci(name, split=0, standardize=False)
    # the split is the mask's partition: train = unmarked rows, test = marked rows, in order
    assert raw.n_train + raw.n_test == table.shape[0]
    assert raw.n_test == int(test_rows.sum())
    assert raw.d == table.shape[1] - 1
    np.testing.assert_array_equal(raw.X_train.numpy(), table[~test_rows, :-1])
    np.testing.assert_array_equal(raw.y_test.numpy(), table[test_rows, -1])
    assert torch.equal(raw.x_std, torch.ones(raw.d, dtype=torch.float64))

    ds = pn.datasets.load_uci(name, split=0)
    assert ds.X_train.shape == (raw.n_train, raw.d) and ds.y_train.shape == (raw.n_train,)
    assert ds.X_test.shape == (raw.n_test, raw.d) and ds.y_test.shape == (raw.n_test,)
    assert not torch.isnan(ds.X_train).any() and not torch.isnan(ds.X_test).any()
    _assert_standardised(ds.X_train, ds.y_train)
    # statistics come from the training part only: the test part maps back exactly
    tol = exact_tol(torch.float64, ds.n_train) * (1 + float(raw.X_test.abs().max()))
    back = ds.X_test * ds.x_std + ds.x_mean
    assert float((back - raw.X_test).abs().max()) <= tol
    assert float((ds.y_mean - raw.y_train.mean()).abs()) <= tol * (
        1 + float(raw.y_train.abs().max())
    )


@pytest.mark.parametrize("name", ["airfoil", "concrete"])
def test_all_ten_splits_partition_the_rows(name):
    sizes = [pn.datasets.load_uci(name, split=s, standardize=False) for s in range(10)]
    n = sizes[0].n_train + sizes[0].n_test
    assert all(ds.n_train + ds.n_test == n for ds in sizes)
    assert sum(ds.n_test for ds in sizes) == n  # each row is a test row of exactly one split
    assert len({ds.y_test.sum().item() for ds in sizes}) > 1  # the splits differ
    assert [ds.split for ds in sizes] == list(range(10))


def test_dtype_device_and_repr():
    ds = pn.datasets.load_uci("concrete", split=3, dtype=torch.float32, device="cpu")
    for t in (ds.X_train, ds.y_train, ds.X_test, ds.y_test, ds.x_mean, ds.x_std, ds.y_std):
        assert t.dtype == torch.float32 and t.device.type == "cpu"
    assert ds.y_mean.shape == () and ds.x_mean.shape == (ds.d,)
    assert "concrete" in repr(ds)
    _assert_standardised(ds.X_train, ds.y_train)


def test_constant_column_gives_unit_std(tmp_path):
    table, mask = _toy()
    table[:, 1] = 4.0
    _write_dataset(tmp_path, "toy", table, mask)
    ds = pn.datasets.load_uci("toy", data_dir=tmp_path)
    assert float(ds.x_std[1]) == 1.0
    assert torch.isfinite(ds.X_train).all() and torch.isfinite(ds.X_test).all()
    assert float(ds.X_train[:, 1].abs().max()) == 0.0


@pytest.mark.parametrize("split", [-1, 10, 11])
def test_bad_split_raises_value_error(split):
    with pytest.raises(ValueError, match="split"):
        pn.datasets.load_uci("airfoil", split=split)


@pytest.mark.parametrize("split", [1.0, True, "0"])
def test_non_integer_split_raises_type_error(split):
    with pytest.raises(TypeError, match="split"):
        pn.datasets.load_uci("airfoil", split=split)


def test_unknown_name_lists_available():
    with pytest.raises(ValueError, match="unknown UCI data set name 'nope'") as err:
        pn.datasets.load_uci("nope")
    assert "airfoil" in str(err.value) and "concrete" in str(err.value)
    assert "PNSOLVE_DATA" in str(err.value)


def test_missing_data_dir_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="PNSOLVE_DATA") as err:
        pn.datasets.load_uci("airfoil", data_dir=tmp_path / "missing")
    assert str(tmp_path / "missing") in str(err.value)


def test_missing_mask_file_raises_file_not_found(tmp_path):
    folder = tmp_path / "toy"
    folder.mkdir()
    table, _ = _toy()
    with gzip.open(folder / "data.csv.gz", "wt") as fh:
        np.savetxt(fh, table, delimiter=",")
    with pytest.raises(FileNotFoundError, match=r"test_mask\.csv\.gz"):
        pn.datasets.load_uci("toy", data_dir=tmp_path)


def test_mask_row_count_mismatch(tmp_path):
    table, mask = _toy()
    _write_dataset(tmp_path, "toy", table, mask[:-1])
    with pytest.raises(ValueError, match="rows"):
        pn.datasets.load_uci("toy", data_dir=tmp_path)


def test_pnsolve_data_env_var_is_respected_and_comes_first(tmp_path, monkeypatch):
    table, mask = _toy(n=30)
    _write_dataset(tmp_path, "airfoil", table, mask)  # shadows the shipped airfoil
    _write_dataset(tmp_path, "toy", table, mask)
    monkeypatch.setenv("PNSOLVE_DATA", str(tmp_path))
    assert {"toy", "airfoil", "concrete"} <= set(pn.datasets.available_uci())
    ds = pn.datasets.load_uci("airfoil", split=1)
    assert ds.n_train + ds.n_test == 30 and ds.source == str(tmp_path / "airfoil")
    assert pn.datasets.load_uci("toy").n_test == 3
    assert pn.datasets.available_uci(tmp_path) == ["airfoil", "toy"]


SHIPPED = [
    "airfoil",
    "bike",
    "concrete",
    "elevators",
    "keggdirected",
    "parkinsons",
    "pol",
    "protein",
    "skillcraft",
]
# (rows, inputs) of every shipped set
SHIPPED_SIZES = {
    "airfoil": (1503, 5),
    "bike": (17379, 17),
    "concrete": (1030, 8),
    "elevators": (16599, 18),
    "keggdirected": (48827, 20),
    "parkinsons": (5875, 20),
    "pol": (15000, 26),
    "protein": (45730, 9),
    "skillcraft": (3338, 19),
}


@pytest.fixture
def package_only(monkeypatch):
    """Look up data sets in the shipped package data only, as in a fresh clone."""
    monkeypatch.delenv("PNSOLVE_DATA", raising=False)
    monkeypatch.setattr(uci, "_shared_data_dir", lambda: None)


def test_package_data_used_when_nothing_else_is_given(package_only):
    assert pn.datasets.available_uci() == SHIPPED
    ds = pn.datasets.load_uci("airfoil")
    assert Path(ds.source) == Path(uci.__file__).parent / "data" / "airfoil"
    assert ds.n_train + ds.n_test == 1503
    with pytest.raises(ValueError, match="available: " + ", ".join(SHIPPED)):
        pn.datasets.load_uci("yacht")


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_dataset_loads_split0(package_only, name):
    ds = pn.datasets.load_uci(name, split=0)
    assert Path(ds.source) == Path(uci.__file__).parent / "data" / name
    n, d = SHIPPED_SIZES[name]
    assert ds.n_train + ds.n_test == n and ds.d == d
    assert ds.X_train.shape == (ds.n_train, d) and ds.y_train.shape == (ds.n_train,)
    assert ds.X_test.shape == (ds.n_test, d) and ds.y_test.shape == (ds.n_test,)
    for t in (ds.X_train, ds.y_train, ds.X_test, ds.y_test):
        assert t.dtype == torch.float64 and bool(torch.isfinite(t).all())
    # the standard 90/10 split: the test part is a tenth of the rows, up to rounding
    assert abs(ds.n_test - n / 10) <= 1
    _assert_standardised(ds.X_train, ds.y_train)


@pytest.mark.parametrize("spelling", ["Pol", "POL", "pol", "pOl"])
def test_names_are_case_insensitive(package_only, spelling):
    ds = pn.datasets.load_uci(spelling, split=0)
    assert ds.name == "pol" and ds.n_train + ds.n_test == 15000
    assert Path(ds.source).name == "pol"


def test_exact_name_wins_over_case_match_and_ambiguity_is_an_error(tmp_path):
    table, mask = _toy(n=30)
    _write_dataset(tmp_path, "Toy", table, mask)
    # one folder matching up to case: found under any spelling, named as on disk
    assert pn.datasets.load_uci("TOY", data_dir=tmp_path).name == "Toy"
    if (tmp_path / "TOY").exists():
        pytest.skip("file system does not keep names that differ only in case")
    _write_dataset(tmp_path, "TOY", table[:20], mask[:20])
    assert pn.datasets.load_uci("Toy", data_dir=tmp_path).n_train == 27
    assert pn.datasets.load_uci("TOY", data_dir=tmp_path).n_train == 18
    with pytest.raises(ValueError, match="several folders"):
        pn.datasets.load_uci("toy", data_dir=tmp_path)


def test_unknown_name_error_lists_all_available(package_only):
    with pytest.raises(ValueError) as err:
        pn.datasets.load_uci("Yacht")
    msg = str(err.value)
    assert "'Yacht'" in msg
    for name in SHIPPED:
        assert name in msg


def test_package_data_ships_license_and_matches_shared_copy():
    data = Path(uci.__file__).parent / "data"
    assert (data / "LICENSE").read_text().startswith("MIT License")
    if SHARED is None:
        pytest.skip("no shared data to compare with")
    for name in SHIPPED:
        for f in ("data.csv.gz", "test_mask.csv.gz"):
            assert (data / name / f).read_bytes() == (SHARED / name / f).read_bytes()
    assert (data / "LICENSE").read_bytes() == (SHARED / "LICENSE").read_bytes()


def test_pyproject_package_data_covers_every_shipped_file():
    import fnmatch

    tomllib = pytest.importorskip("tomllib")

    root = Path(uci.__file__).resolve().parents[2]
    cfg = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = cfg["tool"]["setuptools"]["package-data"]["pnsolve.datasets"]
    data = Path(uci.__file__).parent / "data"
    files = [p.relative_to(data.parent).as_posix() for p in data.rglob("*") if p.is_file()]
    # per UCI set its data and split masks, the license, and the CO2 series with its source
    assert len(files) == 2 * len(SHIPPED) + 1 + 2
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f


def test_bad_name_and_dtype():
    with pytest.raises(ValueError, match="name"):
        pn.datasets.load_uci("../airfoil")
    with pytest.raises(TypeError, match="dtype"):
        pn.datasets.load_uci("airfoil", dtype=torch.int64)
