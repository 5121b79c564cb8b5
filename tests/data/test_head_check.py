"""A large file's first rows are read and checked before the whole file: a bad value 10 rows into a 10M-row CSV was
named only after 45 s and 1.5 GB of reading. The checks here shrink "large" and "first rows" to a small file."""
from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest

import twotower.data.json_lines as json_lines
import twotower.data.readers as readers
from twotower.data.readers import ColumnMap, read_interactions
from twotower.errors import DataError

N = 60


def _frame(n: int = N) -> pd.DataFrame:
    return pd.DataFrame({"user_id": [f"u{i % 7}" for i in range(n)], "item_id": [f"i{i}" for i in range(n)],
                         "timestamp": 1_600_000_000 + np.arange(n), "rating": np.full(n, 4.0)})


@pytest.fixture
def head(monkeypatch):
    """Every file is large; the head (JSON lines, Parquet) is 5 rows, and so is each chunk of a CSV file."""
    monkeypatch.setattr(readers, "HEAD_CHECK_BYTES", 0)
    monkeypatch.setattr(readers, "HEAD_ROWS", 5)
    monkeypatch.setattr(readers, "CHUNK_ROWS", 5)


def _error(path, **kw) -> DataError:
    with pytest.raises(DataError) as e:
        read_interactions(path, **kw)
    return e.value


def _whole_file_error(path, monkeypatch, **kw) -> DataError:
    with monkeypatch.context() as m:
        m.setattr(readers, "HEAD_CHECK_BYTES", 1 << 60)  # no head check: the whole file's read, as before
        return _error(path, **kw)


def _spy(monkeypatch, module, name) -> list:
    calls: list = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def test_bad_csv_row_near_the_start_is_named_without_reading_the_rest(tmp_path, head, monkeypatch):
    df = _frame().astype({"timestamp": object})
    df.loc[2, "timestamp"] = "abc"
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    expected = _whole_file_error(path, monkeypatch)
    chunks = _spy(monkeypatch, pd.io.parsers.TextFileReader, "__next__")
    err = _error(path)
    assert (err.row, err.column) == (4, "timestamp")  # the header is row 1
    assert str(err) == str(expected)
    assert len(chunks) == 1  # the first chunk of 5 rows, of the file's 12


def test_bad_row_past_the_head_gives_the_message_it_gave(tmp_path, head, monkeypatch):
    df = _frame().astype({"user_id": object})
    df.loc[N - 2, "user_id"] = ""
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    err = _error(path)
    assert (err.row, err.column) == (N, "user_id")
    assert str(err) == str(_whole_file_error(path, monkeypatch))


def test_bad_json_line_near_the_start_stops_after_the_first_chunk(tmp_path, head, monkeypatch):
    """Read in chunks of CHUNK_ROWS lines, as a CSV file (test_json_lines_chunk_check.py), no head before them."""
    monkeypatch.setattr(json_lines, "CHUNK_LINES", 2)
    records = _frame().to_dict("records")
    records[2]["rating"] = "five"
    path = tmp_path / "i.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    expected = _whole_file_error(path, monkeypatch)
    chunks = _spy(monkeypatch, json_lines, "ujson_loads")
    err = _error(path)
    assert (err.row, err.column) == (3, "rating")  # JSON lines name the file's line
    assert str(err) == str(expected)
    assert len(chunks) == 1  # the first chunk of 5 lines, of the file's 12


def test_bad_parquet_record_near_the_start_is_named_from_the_first_chunk(tmp_path, head, monkeypatch):
    df = _frame()
    df.loc[2, "rating"] = None
    path = tmp_path / "i.parquet"
    df.to_parquet(path)
    expected = _whole_file_error(path, monkeypatch)
    reads = _spy(monkeypatch, pd, "read_parquet")
    err = _error(path)
    assert (err.row, err.column) == (3, "rating")
    assert str(err) == f"{expected} (counted in the first 5 records; the rest of the file was not read)"
    assert reads == []  # read in chunks (test_parquet_chunk_check.py), not whole, and no head read before them


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_good_file_reads_the_same_and_warns_once(tmp_path, head, monkeypatch, caplog, suffix):
    df = _frame()
    df.loc[1, "rating"] = 0.0  # warned about (a rating of 0 trains as a positive), in the head too
    path = tmp_path / f"i{suffix}"
    {".csv": lambda: df.to_csv(path, index=False), ".jsonl": lambda: df.to_json(path, orient="records", lines=True),
     ".parquet": lambda: df.to_parquet(path)}[suffix]()
    with caplog.at_level(logging.INFO, logger="twotower.data.readers"):
        got = read_interactions(path)
    said = [r.getMessage() for r in caplog.records]
    with monkeypatch.context() as m:
        m.setattr(readers, "HEAD_CHECK_BYTES", 1 << 60)
        expected = read_interactions(path)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.attrs == expected.attrs
    assert sum("rating of 0 or less" in m for m in said) == 1
    assert sum(m.startswith("read ") for m in said) == 1


def test_time_units_are_told_from_the_whole_column_not_the_head(tmp_path, head, monkeypatch):
    # the head is milliseconds, the rest of the file seconds: the head alone would take its second-rows as the
    # odd ones; the whole column's median says the millisecond rows are
    df = _frame()
    df.loc[:3, "timestamp"] = df.loc[:3, "timestamp"] * 1000
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    err = _error(path, columns=ColumnMap())
    assert (err.row, err.column) == (2, "timestamp")
    # refused once the rows read outnumber what may follow (test_unit_mix_chunks.py), in the whole column's words
    assert str(err).removesuffix(" (counted in the first 40 rows; the rest of the file was not read)") \
        == str(_whole_file_error(path, monkeypatch))


def test_counts_of_a_head_error_say_they_cover_the_head_alone(tmp_path, head, monkeypatch):
    """Empty ids at rows 3 and 50: the head (5 rows) saw one, and "1 row(s) in total" would be false of the file."""
    df = _frame().astype({"user_id": object})
    df.loc[[1, 48], "user_id"] = ""
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    err = _error(path)
    assert (err.row, err.column) == (3, "user_id")
    assert "in total" in str(err) and "counted in the first 5 rows; the rest of the file was not read" in str(err)
    assert "2 row(s) in total" in str(_whole_file_error(path, monkeypatch))
