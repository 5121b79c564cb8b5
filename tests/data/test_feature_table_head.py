"""A large feature table's first rows are read and checked before the whole table: a bad cell at row 12 of a 3M-row
item table was named after the whole table was read (5.9 s CPU, 920 MB). Here "large" is any file, the head 5 rows."""
from __future__ import annotations

import logging

import pandas as pd
import pytest

import twotower.data.readers as readers
from twotower.data.features import FeatureSpec, read_feature_table
from twotower.errors import DataError

N = 40
SPEC = FeatureSpec(key="item_id", categorical=("genre",), numeric=("year",), multi=("tags",))


def _table(n: int = N) -> pd.DataFrame:
    return pd.DataFrame({"item_id": [f"i{i}" for i in range(n)], "genre": [f"g{i % 3}" for i in range(n)],
                         "year": [str(1990 + i % 30) for i in range(n)], "tags": ["a|b"] * n})


@pytest.fixture
def head(monkeypatch):
    monkeypatch.setattr(readers, "HEAD_CHECK_BYTES", 0)
    monkeypatch.setattr(readers, "HEAD_ROWS", 5)


def _write(df: pd.DataFrame, path, suffix: str) -> None:
    {".csv": lambda: df.to_csv(path, index=False), ".jsonl": lambda: df.to_json(path, orient="records", lines=True),
     ".parquet": lambda: df.to_parquet(path)}[suffix]()


def _error(path) -> DataError:
    with pytest.raises(DataError) as e:
        read_feature_table(path, SPEC, key_role="item key")
    return e.value


def _whole(monkeypatch, fn):
    with monkeypatch.context() as m:
        m.setattr(readers, "HEAD_CHECK_BYTES", 1 << 60)
        return fn()


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("column, value", [("year", "x"), ("item_id", "i1"), ("genre", None)])
def test_bad_row_near_the_start_is_named_from_the_head(tmp_path, head, monkeypatch, suffix, column, value):
    df = _table()
    df.loc[2, column] = value  # a number that is not one; a key repeated; a missing category (no error)
    path = tmp_path / f"items{suffix}"
    _write(df, path, suffix)
    reads: list = []
    real = readers.read_table_numbered

    def spy(*args, **kwargs):
        reads.append(kwargs.get("nrows"))
        return real(*args, **kwargs)

    monkeypatch.setattr("twotower.data.features.read_table_numbered", spy)
    if column == "genre":  # a good table: the head, then the whole
        got = read_feature_table(path, SPEC, key_role="item key")
        assert reads == [5, None]
        pd.testing.assert_frame_equal(got, _whole(monkeypatch, lambda: read_feature_table(path, SPEC,
                                                                                          key_role="item key")))
        return
    err = _error(path)
    assert reads == [5]  # the head, and not the whole table
    assert (err.row, err.column) == ({".csv": 4, ".jsonl": 3, ".parquet": 3}[suffix], column)
    assert str(err) == str(_whole(monkeypatch, lambda: _error(path)))


def test_head_warns_nothing_the_whole_table_does_not(tmp_path, head, caplog):
    df = _table()
    df.loc[1, "genre"] = "nan"  # read as the category 'nan': warned about once
    path = tmp_path / "items.csv"
    df.to_csv(path, index=False)
    with caplog.at_level(logging.INFO):
        read_feature_table(path, SPEC, key_role="item key")
    said = [r.getMessage() for r in caplog.records if "'nan'" in r.getMessage()]
    assert len(said) == 1
