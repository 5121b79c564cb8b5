"""A large JSON lines file is read and checked a chunk at a time, as a large CSV or Parquet file is: its first 100,000
lines alone were checked, and a bad value past them was named after the whole file was read and converted (and the
head's column types, not the file's, decided what a bad value was). Here "large" is any file and a chunk is 5
lines; the frame, the warnings and the errors must be the whole read's."""
from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

import twotower.data.json_lines as json_lines
from twotower.data.readers import read_interactions
from twotower.errors import DataError
from tests.data.chunked_reads import interactions_frame, read_every_file_in_chunks, read_whole, refusal

N = 60


def _frame(n: int = N) -> pd.DataFrame:
    return interactions_frame(n)


@pytest.fixture
def chunks(monkeypatch):
    """Every file is large, read 5 lines at a time; returns the number of lines of each chunk parsed, as parsed."""
    read_every_file_in_chunks(monkeypatch)
    read: list = []
    real = json_lines._records

    def spy(lines):
        read.append(len(lines))
        return real(lines)

    monkeypatch.setattr(json_lines, "_records", spy)
    return read


def _write(path, records: list[dict], blank_after: int | None = None) -> None:
    lines = [json.dumps(r) for r in records]
    if blank_after is not None:
        lines.insert(blank_after, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: v for k, v in r.items() if v is not None} for r in json.loads(df.to_json(orient="records"))]


def _error(path, **kw) -> DataError:
    return refusal(path, **kw)


def _whole(monkeypatch, fn):
    return read_whole(monkeypatch, fn)


@pytest.mark.parametrize("column, value", [("timestamp", "abc"), ("user_id", ""), ("rating", "five"),
                                           ("timestamp", 1e30), ("item_id", None)])
def test_bad_line_in_a_middle_chunk_stops_the_read_there(tmp_path, chunks, monkeypatch, column, value):
    records = _records(_frame())
    records[23][column] = value  # the 5th chunk (lines 21-25)
    path = tmp_path / "i.jsonl"
    _write(path, records)
    expected = _whole(monkeypatch, lambda: _error(path))
    chunks.clear()
    err = _error(path)
    assert (err.row, err.unit, err.column) == (24, "line", column)
    # an empty id's count ("1 line(s) in total") is of the lines read
    assert str(err).removesuffix(" (counted in the first 25 lines; the rest of the file was not read)") == str(expected)
    # of the file's 12 chunks: the 5th, and for a message with a count the next, to tell that lines follow
    assert len(chunks) == (6 if column in ("user_id", "item_id") else 5)


@pytest.mark.parametrize("value", ["abc", "five", ""])
def test_one_bad_value_is_named_alike_in_csv_parquet_and_json_lines(tmp_path, chunks, monkeypatch, value):
    """The same bad value at the same data position: the same message, at the row, record or line it is on."""
    column = {"abc": "timestamp", "five": "rating", "": "user_id"}[value]
    df = _frame().astype({column: object})
    df.loc[33, column] = value if value else None
    said = {}
    text = df.astype({column: "string"})  # a Parquet column of text, one value of it bad
    for suffix, write in ((".csv", lambda p: df.to_csv(p, index=False)), (".parquet", lambda p: text.to_parquet(p)),
                          (".jsonl", lambda p: _write(p, _records(df)))):
        path = tmp_path / f"i{suffix}"
        write(path)
        err = _error(path)
        said[suffix] = (err.unit, err.row, err.column,
                        str(err).split(": ", 1)[1].replace(err.unit, "ROW").replace("ROWs", "ROWS"))
    assert said[".csv"][:3] == ("row", 35, column)  # the header is row 1
    assert said[".parquet"][:3] == ("record", 34, column)
    assert said[".jsonl"][:3] == ("line", 34, column)
    if column != "user_id":  # an empty id's reason is the file kind's ("the field is blank", "null, NaN or empty")
        assert said[".csv"][3] == said[".parquet"][3] == said[".jsonl"][3]


def test_lines_are_numbered_as_the_file_has_them_past_the_first_chunk(tmp_path, chunks, monkeypatch):
    records = _records(_frame())
    records[33]["timestamp"] = "yesterday"
    path = tmp_path / "i.jsonl"
    _write(path, records, blank_after=8)  # a blank line inside the second chunk
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert err.row == expected.row == 35  # 33 lines before it and the blank one
    assert str(err) == str(expected)


def test_counts_are_said_to_be_of_the_lines_read(tmp_path, chunks, monkeypatch):
    records = _records(_frame())
    for i in (12, 13, 50):
        records[i]["user_id"] = ""
    path = tmp_path / "i.jsonl"
    _write(path, records, blank_after=3)  # chunks of 5 lines: 14 records in the first 15
    err = _error(path)
    assert (err.row, err.column) == (14, "user_id")
    assert "2 line(s) in total" in str(err)
    assert str(err).endswith("(counted in the first 15 lines; the rest of the file was not read)")
    assert "3 line(s) in total" in str(_whole(monkeypatch, lambda: _error(path)))


def test_a_bad_json_line_in_a_later_chunk_is_named_as_before(tmp_path, chunks, monkeypatch):
    path = tmp_path / "i.jsonl"
    lines = [json.dumps(r) for r in _records(_frame())]
    lines[40] = lines[40][:-1]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert (err.row, err.unit) == (41, "line") and str(err) == str(expected)
    lines[40] = "[1, 2]"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert str(_error(path)) == str(_whole(monkeypatch, lambda: _error(path)))


@pytest.mark.parametrize("times", ["numbers", "fractions", "dates", "mixed", "ids"])
def test_good_file_reads_the_same_in_chunks(tmp_path, chunks, monkeypatch, caplog, times):
    df = _frame().astype({"timestamp": object, "item_id": object})
    df.loc[3, "rating"] = 0.0  # warned about, once
    stamps = pd.to_datetime(_frame()["timestamp"], unit="s").dt.strftime("%Y-%m-%dT%H:%M:%S")
    if times == "fractions":
        df.loc[47, "timestamp"] = 1_600_000_047.25  # a float in one chunk: floored and warned about, once
    elif times == "dates":
        df["timestamp"] = stamps
    elif times == "mixed":
        df["timestamp"] = df["timestamp"].where(df.index < 30, stamps)
    elif times == "ids":  # integer ids, one chunk's of them floats, another's text
        df["item_id"] = pd.Series(range(N), dtype=object)
        df.loc[12, "item_id"] = 12.0
        df.loc[40, "item_id"] = "0040"
    df.loc[11] = df.loc[10]  # a duplicate, dropped
    path = tmp_path / "i.jsonl"
    _write(path, _records(df), blank_after=20)
    with caplog.at_level(logging.INFO, logger="twotower.data.readers"):
        got = read_interactions(path)
    said = [r.getMessage() for r in caplog.records]
    assert len(chunks) == 13
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="twotower.data.readers"):
        expected = _whole(monkeypatch, lambda: read_interactions(path))
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert got.attrs == expected.attrs
    assert said == [r.getMessage() for r in caplog.records]
    assert sum("rating of 0 or less" in m for m in said) == 1


@pytest.mark.parametrize("column", ["timestamp", "rating", "user_id"])
def test_a_key_the_first_chunk_lacks_or_a_later_one_lacks_is_refused_as_in_a_whole_read(tmp_path, chunks,
                                                                                        monkeypatch, column):
    """Records without the key: null in a whole read. A later chunk's lacking it is refused at its first line; a first
    chunk's lacking a timestamp or rating that later records have was read as no such column (row order, 1.0)."""
    records = _records(_frame())
    for r in records[20:25]:
        del r[column]
    path = tmp_path / "i.jsonl"
    _write(path, records)
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert (err.row, err.column) == (expected.row, expected.column) == (21, column)
    assert str(err).removesuffix(" (counted in the first 25 lines; the rest of the file was not read)") == str(expected)
    if column == "user_id":
        return  # a first chunk without ids is a file without them (as its head's was): "column not found"
    records = _records(_frame())
    for r in records[:5]:
        del r[column]
    _write(path, records)
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert (err.row, err.column) == (expected.row, expected.column) == (1, column)
    assert str(err).removesuffix(" (counted in the first 10 lines; the rest of the file was not read)") == str(expected)
