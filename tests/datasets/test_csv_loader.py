"""User CSV loader: header detection, gzip, delimiters, errors naming the line, determinism."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

import pnsolve as pn

ROWS = np.arange(60, dtype=np.float64).reshape(20, 3) / 7.0


def _write(path, rows=ROWS, header=None, delimiter=","):
    lines = [] if header is None else [header]
    lines += [delimiter.join(repr(float(v)) for v in row) for row in rows]
    text = "\n".join(lines) + "\n"
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def _all_rows(ds):
    X = torch.cat([ds.X_train, ds.X_test])
    y = torch.cat([ds.y_train, ds.y_test])
    return torch.cat([X, y[:, None]], dim=1)


def test_plain_header_and_gzip_give_the_same_data(tmp_path):
    plain = pn.datasets.load_csv(_write(tmp_path / "a.csv"), standardize=False)
    header = pn.datasets.load_csv(
        _write(tmp_path / "b.csv", header="x1,x2,target"), standardize=False
    )
    zipped = pn.datasets.load_csv(_write(tmp_path / "c.csv.gz"), standardize=False)
    for ds in (plain, header, zipped):
        assert (ds.n_train, ds.n_test, ds.d) == (18, 2, 2)
        assert torch.equal(ds.X_train, plain.X_train) and torch.equal(ds.y_test, plain.y_test)
    # train ∪ test is a permutation of the file's rows
    got = _all_rows(plain).numpy()
    np.testing.assert_array_equal(got[np.argsort(got[:, 0])], ROWS)
    assert zipped.name == "c" and header.name == "b" and plain.split == 0


@pytest.mark.parametrize("delimiter", [";", "\t", " "])
def test_delimiters_are_guessed(tmp_path, delimiter):
    ds = pn.datasets.load_csv(_write(tmp_path / "d.txt", delimiter=delimiter), standardize=False)
    assert ds.d == 2 and ds.n_train + ds.n_test == 20


def test_explicit_delimiter_and_comments(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("# a comment\n1|2|3\n\n4|5|6\n7|8|9\n")
    ds = pn.datasets.load_csv(path, delimiter="|", standardize=False, test_fraction=0.3)
    assert (ds.n_train, ds.n_test, ds.d) == (2, 1, 2)


def test_split_is_deterministic_in_the_seed(tmp_path):
    path = _write(tmp_path / "f.csv")
    a = pn.datasets.load_csv(path, split_seed=3)
    b = pn.datasets.load_csv(path, split_seed=3)
    c = pn.datasets.load_csv(path, split_seed=4)
    assert torch.equal(a.X_test, b.X_test) and torch.equal(a.y_train, b.y_train)
    assert not torch.equal(a.y_test, c.y_test)
    assert a.split == 3


def test_standardisation_and_dtype(tmp_path):
    ds = pn.datasets.load_csv(_write(tmp_path / "g.csv"), test_fraction=0.25, dtype=torch.float32)
    assert ds.X_train.dtype == torch.float32 and ds.n_test == 5
    tol = pn.testing.exact_tol(torch.float32, ds.n_train) * 10
    assert float(ds.X_train.mean(0).abs().max()) <= tol
    assert float((ds.y_train.std(correction=0) - 1).abs()) <= tol


def test_non_numeric_value_names_file_and_line(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a,b,c\n1,2,3\n4,5,6\n7,oops,9\n")
    with pytest.raises(ValueError, match=r"h\.csv, line 4: could not parse 'oops'"):
        pn.datasets.load_csv(path)


def test_ragged_row_names_line(tmp_path):
    path = tmp_path / "i.csv"
    path.write_text("1,2,3\n4,5\n")
    with pytest.raises(ValueError, match="line 2: expected 3 columns"):
        pn.datasets.load_csv(path)


def test_too_few_rows_or_columns(tmp_path):
    one_row = tmp_path / "j.csv"
    one_row.write_text("x,y\n1,2\n")
    with pytest.raises(ValueError, match="at least 2"):
        pn.datasets.load_csv(one_row)
    one_col = tmp_path / "k.csv"
    one_col.write_text("1\n2\n3\n")
    with pytest.raises(ValueError, match="column"):
        pn.datasets.load_csv(one_col)


def test_argument_errors(tmp_path):
    path = _write(tmp_path / "l.csv")
    with pytest.raises(ValueError, match="test_fraction"):
        pn.datasets.load_csv(path, test_fraction=1.0)
    with pytest.raises(TypeError, match="split_seed"):
        pn.datasets.load_csv(path, split_seed=0.5)
    with pytest.raises(FileNotFoundError, match="path"):
        pn.datasets.load_csv(tmp_path / "missing.csv")


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "NaN"])
def test_non_finite_value_names_file_and_line(tmp_path, value):
    path = tmp_path / "t.csv"
    path.write_text(f"a,b\n1,2\n3,{value}\n5,6\n")
    with pytest.raises(ValueError, match=rf"t\.csv, line 3: non-finite value '{value}'"):
        pn.datasets.load_csv(path)


def test_gz_that_is_not_gzip_and_binary_files_name_the_file(tmp_path):
    fake = tmp_path / "fake.csv.gz"
    fake.write_text("a,b\n1,2\n3,4\n")
    with pytest.raises(ValueError, match=r"fake\.csv\.gz is not a valid gzip file"):
        pn.datasets.load_csv(fake)
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(gzip.compress(b"a,b\n" + b"1,2\n3,4\n" * 50)[:30])
    with pytest.raises(ValueError, match=r"cut\.csv\.gz is not a valid gzip file"):
        pn.datasets.load_csv(cut)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\x89PNG\xff\xfe\x00\x01")
    with pytest.raises(ValueError, match=r"bin\.csv is not UTF-8 text"):
        pn.datasets.load_csv(binary)
