"""Rows repeating (user, item, time) are dropped, a repeat with another rating counted apart; a file without
repeats is read whole, with nothing counted."""
from __future__ import annotations

import pandas as pd

from twotower.data.readers import read_interactions


def test_a_file_without_repeats_keeps_every_row_and_counts_none(tmp_path, caplog):
    p = tmp_path / "i.csv"
    p.write_text("user_id,item_id,timestamp,rating\nu,a,1,5\nu,a,2,1\nu,b,1,3\nv,a,1,2\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(p)
    assert df["rating"].tolist() == [5.0, 1.0, 3.0, 2.0]
    rep = df.attrs["report"]
    assert (rep["rows_read"], rep["rows"], rep["duplicates_dropped"], rep["conflicting_duplicates_dropped"]) == (4, 4, 0, 0)
    assert "repeat" not in caplog.text


def test_repeats_are_told_apart_by_the_time_as_written(tmp_path, caplog):
    # 1.25 and 1.75 both floor to 1: two events, not a repeat; the second 1.75 with another rating is one
    p = tmp_path / "i.csv"
    p.write_text("user_id,item_id,timestamp,rating\nu,a,1.25,5\nu,a,1.75,4\nu,a,1.75,2\nu,a,1.25,5\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(p)
    assert df["rating"].tolist() == [5.0, 4.0]
    rep = df.attrs["report"]
    assert (rep["duplicates_dropped"], rep["conflicting_duplicates_dropped"]) == (1, 1)
    assert "row 4 repeats row 3: rating 2, kept 4" in caplog.text
    pd.testing.assert_series_equal(df["timestamp"], pd.Series([1, 1], name="timestamp"))
