"""A chunked read refuses a timestamp column of mixed epoch units (seconds beside milliseconds) as the chunks are
read, not after the last: once the rows read settle the whole column's unit (its median's), whatever may follow,
with the whole read's error. Here "large" is any file and a chunk is 5 rows."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import twotower.data.readers as readers
from twotower.data.readers import read_interactions
from twotower.errors import DataError
from tests.data.chunked_reads import interactions_frame, read_every_file_in_chunks, read_whole, refusal

N = 200


def _frame(n: int = N) -> pd.DataFrame:
    return interactions_frame(n)


@pytest.fixture
def tallied(monkeypatch):
    """Every file is large, read 5 rows at a time; returns how many chunks' times were tallied."""
    read_every_file_in_chunks(monkeypatch)
    seen: list = []
    real = readers._UnitTally.add

    def spy(self, written, start, most):
        seen.append(start)
        return real(self, written, start, most)

    monkeypatch.setattr(readers._UnitTally, "add", spy)
    return seen


def _write(df: pd.DataFrame, path) -> None:
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        df.to_parquet(path)
    else:
        path.write_text("\n".join(json.dumps(r) for r in json.loads(df.to_json(orient="records"))) + "\n",
                        encoding="utf-8")


def _error(path) -> DataError:
    return refusal(path)


def _first(e: DataError) -> str:
    """The error without the rows it names beside the first."""
    return str(e).split("; the same holds for")[0]


def _whole(monkeypatch, fn):
    return read_whole(monkeypatch, fn)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_milliseconds_after_seconds_are_refused_at_their_chunk(tmp_path, tallied, monkeypatch, suffix):
    """160 rows of seconds, then 40 of milliseconds: refused at the first chunk of them, of the file's 40."""
    df = _frame()
    df.loc[160:, "timestamp"] *= 1000
    path = tmp_path / f"i{suffix}"
    _write(df, path)
    expected = _whole(monkeypatch, lambda: _error(path))
    tallied.clear()
    err = _error(path)
    first = {".csv": 162, ".parquet": 161, ".jsonl": 161}[suffix]  # CSV's header is row 1
    assert (err.row, err.column) == (expected.row, expected.column) == (first, "timestamp")
    assert "has the size of epoch milliseconds" in str(err) and "are epoch seconds" in str(err)
    # the same words, its further rows those read ("the same holds for rows 163, 164, 165, 166", not "... (39 in all)")
    assert _first(err) == _first(expected)
    assert str(err).endswith(f"166 (counted in the first 165 {err.unit}s; the rest of the file was not read)"
                             if suffix == ".csv" else
                             f"165 (counted in the first 165 {err.unit}s; the rest of the file was not read)")
    assert len(tallied) == 33


def test_a_mix_the_rows_read_cannot_settle_waits_for_the_whole_column(tmp_path, tallied, monkeypatch):
    """Milliseconds first, seconds after: the milliseconds are the odd ones only once the seconds outnumber them."""
    df = _frame()
    df.loc[:59, "timestamp"] *= 1000
    path = tmp_path / "i.csv"
    _write(df, path)
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert (err.row, err.column) == (expected.row, expected.column) == (2, "timestamp")
    assert str(err).split(" (counted in the first ")[0] == str(expected)
    assert len(tallied) < N // 5  # the seconds outnumber the rest of the file before its end


@pytest.mark.parametrize("zeros", [25, 120])
def test_zeros_first_read_as_a_whole_read_does(tmp_path, tallied, monkeypatch, zeros):
    """Zeros ("unknown") in the first chunks, milliseconds after: a good file while the milliseconds are the median
    (no chunk refuses it), a bad one when the zeros are (the milliseconds have the size of another unit)."""
    df = _frame()
    df["timestamp"] = np.where(df.index < zeros, 0, df["timestamp"] * 1000)
    path = tmp_path / "i.csv"
    _write(df, path)
    if zeros < N // 2:
        got = read_interactions(path)
        expected = _whole(monkeypatch, lambda: read_interactions(path))
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
        assert got.attrs == expected.attrs
        return
    expected = _whole(monkeypatch, lambda: _error(path))
    err = _error(path)
    assert (err.row, err.column) == (expected.row, expected.column) == (zeros + 2, "timestamp")
    assert _first(err) == _first(expected) and "(counted in the first" in str(err)
    assert len(tallied) < N // 5
