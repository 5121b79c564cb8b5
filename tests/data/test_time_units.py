"""Timestamps in epoch milliseconds, microseconds or nanoseconds: date cut-offs follow the data's unit.

Before: ``global_time_split`` turned a date cut-off into epoch seconds whatever the data held, so with
millisecond logs every row was after it and the split stopped on an empty train part ("use a smaller
valid/test share") -- or, with cut-offs past the data in seconds, held nothing out at all; a numeric
cut-off in seconds against millisecond data did the same without a word about units.
"""
from __future__ import annotations

import pandas as pd
import pytest

from twotower.config import DataConfig
from twotower.data import global_time_split, read_interactions
from twotower.data.timeunits import detect_unit, unit_of
from twotower.errors import ConfigError, DataError
from twotower.pipeline.sources import load_sources

DAY = 86_400
APRIL = 1_711_929_600  # 2024-04-01 00:00:00 UTC in epoch seconds
PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def frame(unit: str) -> pd.DataFrame:
    """Two users, one event a week from 2024-04-01 to 2024-06-24, in ``unit``."""
    seconds = [APRIL + k * 7 * DAY + 3600 for k in range(13)]
    rows = [(u, f"i{k}", t * PER_SECOND[unit]) for u in ("a", "b") for k, t in enumerate(seconds)]
    return read_interactions(pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]))


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_date_cutoffs_split_each_unit_alike(unit):
    s = global_time_split(frame(unit), "2024-05-01", "2024-06-01")
    assert (len(s.train), len(s.valid), len(s.test)) == (10, 8, 8)
    assert s.report["time_unit"] == unit
    # the cut-offs as compared: in the data's unit, written to split_report.json
    assert s.report["valid_start"] == 1_714_521_600 * PER_SECOND[unit]
    # the timestamps themselves are kept as they were
    assert s.test["timestamp"].min() == (APRIL + 9 * 7 * DAY + 3600) * PER_SECOND[unit]


def test_numbers_in_the_data_unit_still_cut():
    s = global_time_split(frame("ms"), 1_714_521_600_000, 1_717_200_000_000)
    assert (len(s.train), len(s.valid), len(s.test)) == (10, 8, 8)


@pytest.mark.parametrize("data_unit,cutoff,suggested", [
    ("ms", 1_714_521_600, "1714521600000"),  # seconds against milliseconds: everything after it
    ("s", 1_714_521_600_000, "1714521600"),  # milliseconds against seconds: everything before it
    ("ns", 1_714_521_600_000, "1714521600000000000"),
])
def test_a_number_in_another_unit_is_refused_naming_the_setting(data_unit, cutoff, suggested):
    with pytest.raises(ConfigError) as e:
        global_time_split(frame(data_unit), cutoff, "2024-06-01", names=("data.valid_start", "data.test_start"))
    text = str(e.value)
    assert text.startswith(f"data.valid_start={cutoff}") and suggested in text
    assert "2024-04-01 01:00:00 UTC" in text and "2024-06-24 01:00:00 UTC" in text  # the data's range, as dates


def test_cutoffs_beyond_the_data_warn_with_the_unit_and_range(caplog):
    with caplog.at_level("WARNING", logger="twotower.data.splits"):
        s = global_time_split(frame("ms"), "2024-07-01", "2024-08-01")
    assert len(s.train) == 26 and len(s.valid) == len(s.test) == 0
    assert "valid is empty" in caplog.text and "test is empty" in caplog.text
    assert "epoch milliseconds" in caplog.text and "1719190800000 (2024-06-24 01:00:00 UTC)" in caplog.text


def test_cutoffs_before_the_data_say_train_is_empty_with_the_range():
    with pytest.raises(DataError, match="train part empty") as e:
        global_time_split(frame("us"), "2024-01-01", "2024-02-01")
    assert "epoch microseconds" in str(e.value) and "2024-04-01 01:00:00 UTC" in str(e.value)


def test_a_date_cutoff_on_file_order_is_refused_and_positions_still_cut(tmp_path):
    p = tmp_path / "seq.txt"
    p.write_text("1 1\n1 2\n1 3\n1 4\n2 2\n2 3\n2 5\n", encoding="utf-8")
    df = read_interactions(p)  # SASRec format: the timestamp is each user's line number
    with pytest.raises(ConfigError, match="no time column"):
        global_time_split(df, "2024-05-01", "2024-06-01")
    s = global_time_split(df, 2, 3)
    assert (len(s.train), len(s.valid), len(s.test)) == (4, 2, 1) and s.report["time_unit"] == "row order"


def test_iso_dates_beside_milliseconds_join_them_in_milliseconds(tmp_path):
    p = tmp_path / "i.csv"
    p.write_text("user_id,item_id,timestamp\nu,a,1714521600000\nu,b,2024-05-01T00:00:01Z\nu,c,1714521602000\n",
                 encoding="utf-8")
    df = read_interactions(p)
    assert df["timestamp"].tolist() == [1_714_521_600_000, 1_714_521_601_000, 1_714_521_602_000]
    only_dates = tmp_path / "d.csv"
    only_dates.write_text("user_id,item_id,timestamp\nu,a,2024-05-01\n", encoding="utf-8")
    assert read_interactions(only_dates)["timestamp"].tolist() == [1_714_521_600]  # as before: seconds


def test_unit_bands_do_not_overlap_for_realistic_times():
    # 1973-03-03 .. 5138: each unit keeps to its band; a few zeros do not sway a column's unit
    for unit, factor in PER_SECOND.items():
        for seconds in (100_000_000, APRIL, 9_000_000_000):  # 1973-03-03, 2024, 2255
            assert unit_of(seconds * factor) == unit
    assert detect_unit([0, 0, APRIL * 1000, APRIL * 1000 + 1, APRIL * 1000 + 2]) == "ms"


def test_data_config_takes_dates_and_splits_in_the_data_unit(tmp_path):
    cfg = DataConfig(split="time", valid_start="2024-05-01", test_start="2024-06-01")
    src = load_sources(cfg, frames={"path": frame("ms")})
    assert (len(src.train), len(src.valid), len(src.test)) == (10, 8, 8)
    assert src.report["split"]["time_unit"] == "ms"
    with pytest.raises(ConfigError, match="data.valid_start"):
        DataConfig(split="time", valid_start="the first of May", test_start="2024-06-01")


def test_an_empty_test_part_is_no_part_not_an_empty_file(tmp_path, caplog):
    cfg = DataConfig(split="time", valid_start="2024-06-01", test_start="2024-07-01")
    with caplog.at_level("WARNING", logger="twotower.data.splits"):
        src = load_sources(cfg, frames={"path": frame("ms")})
    assert src.test is None and len(src.valid) == 8 and "test is empty" in caplog.text
