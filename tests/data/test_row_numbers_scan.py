"""A bad row is named after reading the file up to that row, not after a pass over all of it."""
from __future__ import annotations

import csv
import logging
from types import SimpleNamespace

import pytest

from twotower.data import columns, read_interactions
from twotower.errors import DataError


@pytest.fixture
def records_read(monkeypatch):
    """How many CSV records the row numbering reads (its own csv.reader, counted)."""
    seen = {"n": 0}

    class counting:  # csv.reader's records, counted; its line_num kept (the editor's line beside a row)
        def __init__(self, *args, **kwargs):
            self._reader = csv.reader(*args, **kwargs)

        def __iter__(self):
            return self

        def __next__(self):
            rec = next(self._reader)
            seen["n"] += 1
            return rec

        @property
        def line_num(self) -> int:
            return self._reader.line_num

    monkeypatch.setattr(columns, "csv", SimpleNamespace(reader=counting))
    return seen


def _file(tmp_path, bad_at: int, rows: int = 20_000):
    lines = ["user_id,item_id,timestamp"]
    for i in range(rows):
        lines.append(f"u{i % 50},i{i},{'soon' if i == bad_at else 1_600_000_000 + i}")
        if i == 2:
            lines.append("")  # a blank line counts as a row of the file
    path = tmp_path / "log.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_bad_timestamp_early_in_a_long_file_is_named_without_numbering_every_row(tmp_path, records_read):
    # Before: RowNumbers numbered all 20,001 records of the file (a 10M-row file: 10M Python ints, ~12 s) to name row 7
    path = _file(tmp_path, bad_at=4)
    with pytest.raises(DataError) as err:
        read_interactions(path)
    assert err.value.row == 7 and "soon" in str(err.value)  # header, 3 rows, the blank line, row 7 holds i4
    assert records_read["n"] < 10


def test_numbers_past_an_earlier_scan_and_past_the_end(tmp_path):
    path = _file(tmp_path, bad_at=-1, rows=10)
    rows = columns.RowNumbers(path=path, sep=",")
    assert rows.number(0) == 2
    assert rows.number(8) == 11  # scanned further than the first call did; the blank line after row 4 counted
    assert rows.fields(9) == (3, ["user_id", "item_id", "timestamp"])
    assert rows.number(12) == 14  # past the data: the position's own number, as before
    jsonl = tmp_path / "log.jsonl"
    jsonl.write_text('{"a": 1}\n\n{"a": 2}\n{"a": 3}\n')
    lines = columns.RowNumbers("line", 1, jsonl)
    assert (lines.number(0), lines.number(2), lines.number(1), lines.number(5)) == (1, 4, 3, 6)


def test_an_empty_id_late_in_the_file_is_still_told_by_its_fields(tmp_path, caplog):
    path = tmp_path / "log.csv"
    path.write_text("user_id,item_id,timestamp\n" + "".join(f"u{i},i{i},{i}\n" for i in range(30)) + "u9\n")
    with caplog.at_level(logging.WARNING), pytest.raises(DataError) as err:
        read_interactions(path)
    assert err.value.row == 32 and "the row has 1 field where the header has 3" in str(err.value)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_bad_row_deep_in_an_unquoted_file_is_numbered_on_its_bytes(tmp_path, records_read, monkeypatch, newline):
    """The csv module's scan to row 15,000,001 of a 20M-row file, after the chunked read had found the bad value there,
    took `data split` from 15.6 s to 21.5 s and 1.4 GB to 2.5 GB: a file without quotes is numbered on its bytes, to
    the same rows and fields."""
    monkeypatch.setattr(columns, "_SCAN_BYTES", 100, raising=False)  # many blocks, each cut inside a line
    path = _file(tmp_path, bad_at=15_000)
    path.write_bytes(path.read_bytes().replace(b"\n", newline.encode()))
    with pytest.raises(DataError) as err:
        read_interactions(path)
    assert err.value.row == 15_003 and "soon" in str(err.value)  # the header, rows i0-i2, the blank line: i at i + 3
    rows = columns.RowNumbers(path=path, sep=",")
    assert (rows.number(2), rows.number(3), rows.fields(3)) == (4, 6, (3, ["user_id", "item_id", "timestamp"]))
    assert records_read["n"] == 0
