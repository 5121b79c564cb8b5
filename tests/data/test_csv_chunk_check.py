"""A large CSV file is read and checked a chunk at a time: a bad row at row 200,000 of a 4M-row file was named after
the whole file was read and converted (3.9 s CPU, 750 MB). Here "large" is any file and a chunk is 5 rows."""
from __future__ import annotations

import logging

import pandas as pd
import pytest

from twotower.data.readers import read_interactions
from twotower.errors import DataError
from tests.data.chunked_reads import interactions_frame, read_every_file_in_chunks, read_whole, refusal

N = 60


def _frame(n: int = N) -> pd.DataFrame:
    return interactions_frame(n)


@pytest.fixture
def chunks(monkeypatch):
    """Every file is large, read 5 rows at a time; returns the chunks read, as they are read."""
    read_every_file_in_chunks(monkeypatch)
    read: list = []
    real = pd.io.parsers.TextFileReader.__next__

    def spy(self):
        chunk = real(self)
        read.append(len(chunk))
        return chunk

    monkeypatch.setattr(pd.io.parsers.TextFileReader, "__next__", spy)
    return read


def _error(path, **kw) -> DataError:
    return refusal(path, **kw)


def _whole(monkeypatch, fn):
    return read_whole(monkeypatch, fn)


@pytest.mark.parametrize("column, value", [("timestamp", "abc"), ("user_id", ""), ("rating", "five"),
                                           ("timestamp", "1e30")])
def test_bad_row_in_a_middle_chunk_stops_the_read_there(tmp_path, chunks, monkeypatch, column, value):
    df = _frame().astype({column: object})
    df.loc[23, column] = value  # the 5th chunk (rows 20-24)
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    expected = _whole(monkeypatch, lambda: _error(path))
    chunks.clear()
    err = _error(path)
    assert (err.row, err.column) == (25, column)  # the header is row 1
    # an empty id's count ("1 row(s) in total") is of the rows read
    assert str(err).removesuffix(" (counted in the first 25 rows; the rest of the file was not read)") == str(expected)
    # of the file's 12 chunks: the 5th, and for a message with a count the next, to tell that rows follow
    assert len(chunks) == (6 if column == "user_id" else 5)


def test_rows_are_numbered_as_the_file_has_them_past_the_first_chunk(tmp_path, chunks, monkeypatch):
    """A quoted line break and a blank line in the first chunks: the bad row's number is its row in the file."""
    df = _frame().astype({"item_id": object, "timestamp": object})
    df.loc[2, "item_id"] = "two\nlines"
    df.loc[33, "timestamp"] = "yesterday"
    path = tmp_path / "i.csv"
    text = df.to_csv(index=False, lineterminator="\n").split("\n")
    text.insert(9, "")  # a blank line inside the second chunk
    path.write_text("\n".join(text), encoding="utf-8")
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert err.row == expected.row == 36  # the header, 33 rows before it and the blank line (a record is one row)
    assert str(err) == str(expected)


def test_counts_are_said_to_be_of_the_rows_read(tmp_path, chunks, monkeypatch):
    df = _frame().astype({"user_id": object})
    df.loc[[12, 13, 50], "user_id"] = ""
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    err = _error(path)
    assert (err.row, err.column) == (14, "user_id")
    assert "2 row(s) in total" in str(err) and "(counted in the first 15 rows; the rest of the file was not read)" \
        in str(err)
    assert "3 row(s) in total" in str(_whole(monkeypatch, lambda: _error(path)))


def test_ragged_row_in_a_later_chunk_is_named_as_before(tmp_path, chunks, monkeypatch):
    path = tmp_path / "i.csv"
    lines = _frame().to_csv(index=False, lineterminator="\n").splitlines()
    lines[40] += ",extra"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert err.row == 41
    assert str(err) == str(expected)


@pytest.mark.parametrize("times", ["numbers", "dates", "mixed"])
def test_good_file_reads_the_same_in_chunks(tmp_path, chunks, monkeypatch, caplog, times):
    df = _frame().astype({"timestamp": float})
    df.loc[3, "rating"] = 0.0  # warned about, once
    # a fraction finer than a millisecond: floored and warned about, once (a quarter second was, until fractions of
    # a second moved the column to milliseconds, which hold it without flooring)
    df.loc[7, "timestamp"] = 1.5e9 + 0.2505
    if times != "numbers":
        dates = pd.to_datetime(df["timestamp"], unit="s").dt.strftime("%Y-%m-%dT%H:%M:%S").astype(object)
        df["timestamp"] = dates if times == "dates" else df["timestamp"].astype(object).where(df.index < 30, dates)
    df.loc[11] = df.loc[10]  # a duplicate, dropped
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    with caplog.at_level(logging.INFO, logger="twotower.data.readers"):
        got = read_interactions(path)
    said = [r.getMessage() for r in caplog.records]
    assert len(chunks) == 12
    expected = _whole(monkeypatch, lambda: read_interactions(path))
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.attrs == expected.attrs
    assert sum("rating of 0 or less" in m for m in said) == 1
    assert sum(m.startswith("read ") for m in said) == 1
    if times == "numbers":
        assert sum("fractional part" in m for m in said) == 1


def test_header_alone_is_refused_as_before(tmp_path, chunks, monkeypatch):
    path = tmp_path / "i.csv"
    path.write_text("user_id,item_id,timestamp\n", encoding="utf-8")
    assert str(_error(path)) == str(_whole(monkeypatch, lambda: _error(path)))
    path.write_text("uid,item_id,timestamp\nu1,i1,1\n", encoding="utf-8")
    assert str(_error(path)) == str(_whole(monkeypatch, lambda: _error(path)))


def test_chunks_of_dates_are_parsed_once_and_read_as_a_whole_read_does(tmp_path, chunks, monkeypatch):
    """Milliseconds in the last chunk only, and offsets: the column's unit is the whole column's, as in one read."""
    df = _frame()
    stamps = pd.to_datetime(df["timestamp"], unit="s")
    df["timestamp"] = stamps.dt.strftime("%Y-%m-%dT%H:%M:%S+02:00").astype(object)
    df.loc[57, "timestamp"] = "2020-09-13T12:26:40.250Z"
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    parsed: list = []
    real = pd.to_datetime

    def spy(arg, *args, **kwargs):
        if isinstance(arg, pd.Series) and (arg.dtype == object or isinstance(arg.dtype, pd.StringDtype)):
            parsed.append(len(arg))  # text parsed (datetimes passed through are not)
        return real(arg, *args, **kwargs)

    monkeypatch.setattr(pd, "to_datetime", spy)
    got = read_interactions(path)
    assert sum(parsed) == N  # each date's text parsed once
    monkeypatch.setattr(pd, "to_datetime", real)
    expected = _whole(monkeypatch, lambda: read_interactions(path))
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.attrs == expected.attrs and got.attrs["report"]["dates_unit"] == "ms"


@pytest.mark.parametrize("times", ["dates", "mixed"])
def test_early_date_is_shown_as_the_file_writes_it(tmp_path, chunks, monkeypatch, caplog, times):
    """A chunk of dates is kept parsed: the 'before 1973' warning showed '1970-01-01 00:00:00+00:00'."""
    df = _frame()
    dates = pd.to_datetime(df["timestamp"], unit="s").dt.strftime("%Y-%m-%dT%H:%M:%S").astype(object)
    df["timestamp"] = dates if times == "dates" else df["timestamp"].astype(object).where(df.index < 10, dates)
    df.loc[33, "timestamp"] = "1970-01-01T00:00:00"
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)

    def warned(read):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="twotower.data.readers"):
            read()
        return [r.getMessage() for r in caplog.records if "before 1973" in r.getMessage()]

    got = warned(lambda: read_interactions(path))
    assert len(got) == 1 and "row 35: 1970-01-01T00:00:00, read as" in got[0]
    assert got == _whole(monkeypatch, lambda: warned(lambda: read_interactions(path)))


@pytest.mark.parametrize("early, late", [(("rating", "five"), ("timestamp", "abc")),
                                         (("timestamp", "abc"), ("user_id", "")),
                                         (("item_id", ""), ("rating", "five"))])
def test_the_first_bad_row_in_the_file_is_named_in_chunks_and_whole(tmp_path, chunks, monkeypatch, early, late):
    """A whole read named a late bad time before an early bad rating (its columns in turn), a chunked read the
    early rating (its chunks in turn): both name the bad row that comes first in the file."""
    df = _frame().astype(object)
    df.loc[2, early[0]] = early[1]
    df.loc[40, late[0]] = late[1]
    path = tmp_path / "i.csv"
    df.to_csv(path, index=False)
    whole = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert (err.row, err.column) == (whole.row, whole.column) == (4, early[0])
    assert str(err).removesuffix(" (counted in the first 5 rows; the rest of the file was not read)") == str(whole)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_a_chunked_read_logs_its_progress_against_the_files_rows(tmp_path, monkeypatch, caplog, suffix):
    """A 20M-row CSV file (462 MB) was read for 142 s between `data split`'s "reading" and "read" lines with
    nothing in a redirected log; each chunk now counts towards the file's rows, with an ETA."""
    read_every_file_in_chunks(monkeypatch, rows=20)
    path = tmp_path / f"i{suffix}"
    df = _frame()
    if suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix == ".parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_json(path, orient="records", lines=True)
    with caplog.at_level(logging.INFO, logger="twotower"):
        read_interactions(path, log_every_s=1e-9)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"reading {path}")]
    assert [line.split(",")[0] for line in lines] == [f"reading {path}: {n} / {N} rows" for n in (20, 40, 60)]
    assert all("ETA" in line for line in lines)
