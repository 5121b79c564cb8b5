"""A large Parquet file is read and checked a chunk at a time, as a large CSV file is: a bad rating at record 200,000
of a 4M-record file was named after the whole file was read and converted (3.0 s CPU, 0.15 s now). Here "large" is
any file and a chunk is 5 records; the frame, the warnings and the errors must be the whole read's."""
from __future__ import annotations

import logging

import pandas as pd
import pyarrow.parquet as pq
import pytest

from twotower.data.readers import read_interactions
from twotower.errors import DataError
from tests.data.chunked_reads import interactions_frame, read_every_file_in_chunks, read_whole, refusal

N = 60


def _frame(n: int = N) -> pd.DataFrame:
    return interactions_frame(n)


@pytest.fixture
def chunks(monkeypatch):
    """Every file is large, read 5 records at a time; returns the sizes of the record batches read, as read."""
    read_every_file_in_chunks(monkeypatch)
    read: list = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        for batch in real(self, *args, **kwargs):
            read.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    return read


def _error(path, **kw) -> DataError:
    return refusal(path, **kw)


def _whole(monkeypatch, fn):
    return read_whole(monkeypatch, fn)


@pytest.mark.parametrize("column, value", [("timestamp", "abc"), ("user_id", None), ("rating", "five"),
                                           ("timestamp", "1e30")])
def test_bad_record_in_a_middle_chunk_stops_the_read_there(tmp_path, chunks, monkeypatch, column, value):
    df = _frame().astype({column: object})
    df.loc[23, column] = value  # the 5th chunk (records 20-24)
    df[column] = df[column].map(lambda v: None if v is None else str(v))
    path = tmp_path / "i.parquet"
    df.to_parquet(path, row_group_size=7)  # row groups across the chunks' boundaries
    expected = _whole(monkeypatch, lambda: _error(path))
    chunks.clear()
    err = _error(path)
    assert (err.row, err.unit, err.column) == (24, "record", column)  # records are numbered from 1
    # an empty id's count ("1 record(s) in total") is of the records read
    assert str(err).removesuffix(" (counted in the first 25 records; the rest of the file was not read)") == str(expected)
    assert chunks == [5] * 5  # of the file's 12 chunks: up to the 5th, none read whole before them


def test_counts_are_said_to_be_of_the_records_read(tmp_path, chunks, monkeypatch):
    df = _frame().astype({"user_id": object})
    df.loc[[12, 13, 50], "user_id"] = None
    path = tmp_path / "i.parquet"
    df.to_parquet(path)
    err = _error(path)
    assert (err.row, err.column) == (13, "user_id")
    assert "2 record(s) in total" in str(err)
    assert str(err).endswith("(counted in the first 15 records; the rest of the file was not read)")
    assert "3 record(s) in total" in str(_whole(monkeypatch, lambda: _error(path)))


@pytest.mark.parametrize("column", ["timestamp", "rating"])
def test_a_null_in_a_later_chunk_of_integers_is_named_as_in_a_whole_read(tmp_path, chunks, monkeypatch, column):
    """The chunks before it are integers, the one holding it floats (NaN), the whole column floats."""
    df = _frame().astype({"rating": "int64"}).astype({column: object})
    df.loc[47, column] = None
    path = tmp_path / "i.parquet"
    df.astype({column: "Int64"}).to_parquet(path)
    assert pq.read_schema(path).field(column).type == "int64"
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert (err.row, err.column) == (expected.row, expected.column) == (48, column)
    assert str(err).removesuffix(" (counted in the first 50 records; the rest of the file was not read)") == str(expected)


def _good(times: str) -> pd.DataFrame:
    df = _frame()
    df.loc[3, "rating"] = 0.0  # warned about, once
    df.loc[11] = df.loc[10]  # a duplicate, dropped
    stamps = pd.to_datetime(df["timestamp"], unit="s")
    if times == "fractions":
        df["timestamp"] = df["timestamp"].astype("float64")
        df.loc[47, "timestamp"] += 0.25  # a fraction: floored and warned about, once
    elif times == "dates":
        df["timestamp"] = stamps.dt.strftime("%Y-%m-%dT%H:%M:%S")
    elif times == "datetimes":
        df["timestamp"] = stamps
    elif times == "datetimes with a zone":
        df["timestamp"] = stamps.dt.tz_localize("Europe/Paris")
    elif times == "categories":
        df["timestamp"] = stamps.dt.strftime("%Y-%m-%d").astype("category")
        df["item_id"] = df["item_id"].astype("category")
    elif times == "index":  # ids written as the frame's index: columns after the read
        df = df.set_index(["user_id", "item_id"])
    elif times == "nullable":
        df = df.astype({"timestamp": "Int64", "rating": "Float64"})
    return df


@pytest.mark.parametrize("times", ["numbers", "fractions", "dates", "datetimes", "datetimes with a zone",
                                   "categories", "index", "nullable"])
def test_good_file_reads_the_same_in_chunks(tmp_path, chunks, monkeypatch, caplog, times):
    path = tmp_path / "i.parquet"
    df = _good(times)
    df.to_parquet(path)
    with caplog.at_level(logging.INFO, logger="twotower.data.readers"):
        got = read_interactions(path)
    said = [r.getMessage() for r in caplog.records]
    assert len(chunks) == 12
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="twotower.data.readers"):
        expected = _whole(monkeypatch, lambda: read_interactions(path))
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.attrs == expected.attrs
    assert said == [r.getMessage() for r in caplog.records]
    assert sum("rating of 0 or less" in m for m in said) == 1


@pytest.mark.parametrize("rows", [0, N])
def test_no_records_and_a_missing_column_are_refused_as_before(tmp_path, chunks, monkeypatch, rows):
    path = tmp_path / "i.parquet"
    if rows == 0:
        _frame(0).to_parquet(path)
        assert "no data rows" in str(_error(path))
        assert str(_error(path)) == str(_whole(monkeypatch, lambda: _error(path)))
    _frame(rows).rename(columns={"user_id": "uid"}).to_parquet(path)
    chunks.clear()
    assert str(_error(path)) == str(_whole(monkeypatch, lambda: _error(path)))
    assert chunks == ([5] if rows else [])  # the first chunk told it


@pytest.mark.parametrize("column", ["user_id", "rating"])
def test_counts_and_their_note_say_records(tmp_path, chunks, monkeypatch, column):
    """The count said "2 record(s)" (an id) or "2 row(s)" (a rating), the note "counted in the first 15 rows"."""
    df = _frame().astype({column: object})
    df.loc[[12, 13, 50], column] = None
    path = tmp_path / "i.parquet"
    df.to_parquet(path)
    err = str(_error(path))
    assert "2 record(s) in total" in err and "row(s)" not in err and "rows;" not in err
    assert err.endswith("(counted in the first 15 records; the rest of the file was not read)")


@pytest.mark.parametrize("damage", ["truncated", "not parquet"])
def test_a_corrupt_file_reads_alike_in_chunks_and_whole(tmp_path, chunks, monkeypatch, damage):
    """A whole read said "Could not open Parquet input source '<path>': Parquet magic bytes ...", a chunked one
    "Parquet magic bytes ...": one message now, naming the file once."""
    path = tmp_path / "i.parquet"
    _frame().to_parquet(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"user_id,item_id\nu1,i1\n" * 20)
    err = str(_error(path))
    assert err == str(_whole(monkeypatch, lambda: _error(path)))
    assert err.startswith(f"file {path}: could not read as parquet (ArrowInvalid: Parquet magic bytes not found")
    assert err.count(str(path)) == 1
