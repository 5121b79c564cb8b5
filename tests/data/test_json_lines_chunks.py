"""JSON lines files are read in chunks (pandas' whole-file read took 1.3 GB for 1M records): the frame must be the
one pandas reads from the whole file, whatever falls on which side of a chunk boundary."""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

import twotower.data.json_lines as json_lines
from twotower.data.readers import read_interactions, read_table
from twotower.errors import DataError

RECORDS = [
    {"user_id": "007", "item_id": 18446744073709551615, "timestamp": 1_700_000_000, "rating": 4},
    {"user_id": "7", "item_id": 9007199254740993, "timestamp": 1_700_000_001, "rating": 3.5},
    {"user_id": "007", "item_id": "a,b", "timestamp": 1_700_000_002, "rating": None, "genre": ["x", "y"]},
    {"user_id": "8", "item_id": 5, "timestamp": 1_700_000_003},
    {"user_id": "8", "item_id": 6, "timestamp": None, "rating": 1, "extra": 1},
]


def _whole(text: str) -> pd.DataFrame:
    return pd.read_json(io.StringIO(text), lines=True, dtype=False, convert_dates=False)


@pytest.mark.parametrize("chunk", [1, 2, 3, 100_000])
def test_chunks_read_as_pandas_reads_the_whole_file(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(json_lines, "CHUNK_LINES", chunk)
    text = "\n".join(json.dumps(r) for r in RECORDS[:2]) + "\r\n\n  \n" + "\n".join(json.dumps(r) for r in RECORDS[2:])
    path = tmp_path / "i.jsonl"
    path.write_text(text, encoding="utf-8", newline="")
    df = read_table(path)
    # a later chunk's null makes the whole column float (the timestamps), a later chunk's text makes the item ids
    # objects: as one read of the whole file infers them, and the ids past 2^63 stay exact integers
    pd.testing.assert_frame_equal(df, _whole(text), check_exact=True)
    assert df["item_id"].tolist()[:2] == [18446744073709551615, 9007199254740993]
    assert list(df.columns) == ["user_id", "item_id", "timestamp", "rating", "genre", "extra"]
    assert df["genre"].iloc[2] == ["x", "y"] and np.isnan(df["genre"].iloc[0])


@pytest.mark.parametrize("chunk", [1, 2, 100_000])
def test_ids_stay_exact_text_and_bad_lines_are_named_across_chunks(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(json_lines, "CHUNK_LINES", chunk)
    recs = [{"user_id": "0012", "item_id": 18446744073709551615, "timestamp": 1},
            {"user_id": "0012", "item_id": "007", "timestamp": 2},
            {"user_id": 12, "item_id": 9007199254740993, "timestamp": 3}]
    path = tmp_path / "i.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
    df = read_interactions(path)
    assert df["user_id"].tolist() == ["0012", "0012", "12"]
    assert df["item_id"].tolist() == ["18446744073709551615", "007", "9007199254740993"]
    path.write_text("\n".join(json.dumps(r) for r in recs) + '\n{"user_id": "u", "item_id": \n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_interactions(path)
    assert e.value.row == 4 and e.value.unit == "line" and "i.jsonl" in str(e.value)
