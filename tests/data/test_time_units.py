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


# --- data.time_unit: the unit declared where the magnitude misleads ---------------------------------------------

def early_frame() -> pd.DataFrame:
    """Epoch milliseconds of 1971-1972: below 1e11, so their size reads as seconds (the years 2969-4464)."""
    seconds = [31_536_000 + k * 30 * DAY for k in range(18)]  # 1971-01-01, monthly
    rows = [(u, f"i{k}", t * 1000) for u in ("a", "b") for k, t in enumerate(seconds)]
    return read_interactions(pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]))


def test_time_unit_overrides_a_wrong_guess_for_early_data():
    df = early_frame()
    with pytest.raises(DataError, match="read as epoch seconds"):  # told from the size: the years 2969-4464
        global_time_split(df, "1972-01-01", "1972-03-01")
    s = global_time_split(df, "1972-01-01", "1972-03-01", time_unit="ms")
    assert s.report["time_unit"] == "ms" and (len(s.train), len(s.valid), len(s.test)) == (26, 4, 6)
    assert s.report["valid_start"] == 63_072_000_000  # 1972-01-01 in milliseconds


def test_time_unit_takes_numbers_in_it_without_the_magnitude_check():
    # 63072000000 is the size of epoch milliseconds; beside data declared in ms it is taken as such
    s = global_time_split(early_frame(), 63_072_000_000, 68_256_000_000, time_unit="ms")
    assert (len(s.train), len(s.valid), len(s.test)) == (26, 4, 6)


def test_time_unit_puts_dates_of_the_column_in_that_unit(tmp_path):
    p = tmp_path / "i.csv"
    p.write_text("user_id,item_id,timestamp\nu,a,2024-05-01\nu,b,2024-05-02\n", encoding="utf-8")
    assert read_interactions(p)["timestamp"].tolist() == [1_714_521_600, 1_714_608_000]  # auto: seconds
    assert read_interactions(p, time_unit="ms")["timestamp"].tolist() == [1_714_521_600_000, 1_714_608_000_000]


def test_time_unit_is_a_data_setting_checked_at_construction():
    with pytest.raises(ConfigError, match=r"data.time_unit: 'sec' is not one of auto, s, ms, us, ns"):
        DataConfig(time_unit="sec")
    cfg = DataConfig(split="time", valid_start="1972-01-01", test_start="1972-03-01", time_unit="ms")
    src = load_sources(cfg, frames={"path": early_frame()})
    assert src.report["split"]["time_unit"] == "ms" and len(src.test) == 6


# --- cut-offs typed as 8-digit dates -----------------------------------------------------------------------------

@pytest.mark.parametrize("unit", ["s", "ms"])
def test_a_yyyymmdd_number_outside_the_data_is_refused_naming_both_readings(unit):
    with pytest.raises(ConfigError) as e:
        global_time_split(frame(unit), 20240501, "2024-06-01", names=("--valid-start", "--test-start"))
    text = str(e.value)
    assert "--valid-start=20240501 is ambiguous" in text
    assert "1970-" in text and "2024-05-01" in text  # the number's date and the date's
    assert "Write --valid-start=2024-05-01" in text and str(1_714_521_600 * PER_SECOND[unit]) in text


def test_a_yyyymmdd_number_inside_the_data_is_a_number():
    # epoch seconds of 1970-08 hold 20240501 itself: the number means what it says
    seconds = [20_000_000 + k * DAY for k in range(10)]
    df = read_interactions(pd.DataFrame({"user_id": "u", "item_id": [f"i{k}" for k in range(10)],
                                         "timestamp": seconds}))
    s = global_time_split(df, 20_240_501, 20_500_000)
    assert (len(s.train), len(s.valid), len(s.test)) == (3, 3, 4)


def test_a_numeric_cutoff_after_the_data_warns_with_its_date_and_the_range(caplog):
    with caplog.at_level("WARNING", logger="twotower.data.splits"):
        s = global_time_split(frame("s"), 1_714_521_600, 1_900_000_000)
    assert len(s.test) == 0
    assert "1900000000 (2030-03-17 17:46:40 UTC)" in caplog.text  # what the number means
    assert "2024-04-01 01:00:00 UTC" in caplog.text and "2024-06-24 01:00:00 UTC" in caplog.text  # first, last


def test_data_split_refuses_an_8_digit_cutoff_by_its_flag(tmp_path, capsys):
    from twotower.cli.main import main

    p = tmp_path / "i.csv"
    frame("s").to_csv(p, index=False)
    assert main(["-q", "data", "split", "--input", str(p), "--method", "time", "--valid-start", "20240501",
                 "--test-start", "2024-06-01", "--out", str(tmp_path / "o")]) == 2
    assert "--valid-start=2024-05-01" in capsys.readouterr().err
    assert not (tmp_path / "o" / "train.csv").exists()


# -- sub-second times -----------------------------------------------------------------------------------------------
# Floored to seconds, clicks 277 and 900 ms into one second tied and were put in item-id order: "b" then "a" read
# as "a" then "b", the wrong order for a sequence tower and the wrong "last" item for a leave-last split.
CLICKS = ("user_id,item_id,timestamp\n"
          "u1,z,2014-04-07T10:51:08Z\n"
          "u1,b,2014-04-07T10:51:09.277Z\n"
          "u1,a,2014-04-07T10:51:09.900Z\n")


def test_iso_times_with_milliseconds_keep_their_order(tmp_path):
    from twotower.data import leave_last_n_out

    (tmp_path / "clicks.csv").write_text(CLICKS)
    df = read_interactions(tmp_path / "clicks.csv")
    assert df["timestamp"].tolist() == [1_396_867_868_000, 1_396_867_869_277, 1_396_867_869_900]
    assert df.attrs["report"]["dates_unit"] == "ms" and detect_unit(df["timestamp"].to_numpy()) == "ms"
    split = leave_last_n_out(df, n=1)
    assert split.test["item_id"].tolist() == ["a"] and split.valid["item_id"].tolist() == ["b"]
    # the same times as a datetime column of a DataFrame
    frame_dt = pd.read_csv(tmp_path / "clicks.csv", parse_dates=["timestamp"])
    assert read_interactions(frame_dt)["timestamp"].tolist() == df["timestamp"].tolist()


def test_whole_second_dates_stay_epoch_seconds_and_a_set_unit_wins(tmp_path):
    (tmp_path / "days.csv").write_text("user_id,item_id,timestamp\nu1,a,2024-05-01\nu1,b,2024-05-01T12:00:00Z\n")
    df = read_interactions(tmp_path / "days.csv")
    assert df["timestamp"].tolist() == [1_714_521_600, 1_714_564_800] and df.attrs["report"]["dates_unit"] == "s"
    (tmp_path / "clicks.csv").write_text(CLICKS)
    told = read_interactions(tmp_path / "clicks.csv", time_unit="s")  # data.time_unit=s: floored, as asked
    assert told["timestamp"].tolist()[1:] == [1_396_867_869, 1_396_867_869]


def test_fractional_epoch_seconds_are_kept_as_milliseconds_and_floored_beyond_with_a_warning(tmp_path, caplog):
    # This pinned both floored to 1396867869 with a warning: the files written from them (the split, a run's
    # data/*.csv) then held one second twice, and each later read dropped a click as a duplicate. They are now kept
    # as epoch milliseconds, as ISO times with milliseconds are; only a part finer than that is floored and said.
    (tmp_path / "f.csv").write_text("user_id,item_id,timestamp\nu1,b,1396867869.277\nu1,a,1396867869.9\n")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(tmp_path / "f.csv")
    assert df["timestamp"].tolist() == [1_396_867_869_277, 1_396_867_869_900] and not caplog.records
    assert df.attrs["report"]["dates_unit"] == "ms"
    (tmp_path / "g.csv").write_text("user_id,item_id,timestamp\nu1,b,1396867869.2775\nu1,a,1396867869.9\n")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(tmp_path / "g.csv")
    assert df["timestamp"].tolist() == [1_396_867_869_277, 1_396_867_869_900]
    assert "1 timestamps in column 'timestamp' have a fractional part and are floored to whole milliseconds" \
        in caplog.text


def test_files_read_together_are_put_on_one_time_scale(tmp_path):
    """train.csv with milliseconds beside a valid.csv whose times are whole seconds: stored as epoch seconds, the
    valid items sorted ~45 years before the training ones (seconds are 1000x smaller numbers)."""
    (tmp_path / "train.csv").write_text(CLICKS)
    (tmp_path / "valid.csv").write_text("user_id,item_id,timestamp\nu1,c,2014-04-07T10:51:11Z\n")
    (tmp_path / "numbers.csv").write_text("user_id,item_id,timestamp\nu1,d,1396867872\n")
    src = load_sources(DataConfig(train=str(tmp_path / "train.csv"), valid=str(tmp_path / "valid.csv")))
    assert src.valid["timestamp"].tolist() == [1_396_867_871_000]
    # epoch seconds beside dates that need milliseconds are put on milliseconds too, exactly (x1000): the README's
    # "finest of their units". This pinned a refusal that named the ISO files "epoch milliseconds, told from their
    # size", and kept a file of ISO times with milliseconds from being read beside a train file of epoch seconds.
    src = load_sources(DataConfig(train=str(tmp_path / "train.csv"), valid=str(tmp_path / "valid.csv"),
                                  test=str(tmp_path / "numbers.csv")))
    assert src.test["timestamp"].tolist() == [1_396_867_872_000]
    assert src.report["split"] == "given as files"
    # numbers of two units are still refused (which unit a number means is not for us to guess), each file named
    # by what it holds
    (tmp_path / "ms.csv").write_text("user_id,item_id,timestamp\nu1,e,1396867873000\n")
    with pytest.raises(DataError, match=r"different units \(data.train .*train.csv: ISO dates, stored as epoch "
                       r"milliseconds, data.valid .*numbers.csv: epoch seconds, data.test .*ms.csv: epoch milliseconds"):
        load_sources(DataConfig(train=str(tmp_path / "train.csv"), valid=str(tmp_path / "numbers.csv"),
                                test=str(tmp_path / "ms.csv")))


# ISO times with milliseconds in a file (or beside a file) of epoch seconds: floored to seconds in silence, the two
# clicks below tied and were put in item-id order, "a_late" before "b_early" (the earlier click held out as test)
ISOFRAC = ("user_id,item_id,timestamp\nu1,x,1714500000\nu1,y,1714510000.25\n"
           "u1,b_early,2024-05-01T00:00:00.100Z\nu1,a_late,2024-05-01T00:00:00.900Z\n")


def test_iso_times_with_milliseconds_move_a_column_of_epoch_seconds_to_milliseconds(tmp_path, caplog):
    from twotower.data import leave_last_n_out

    (tmp_path / "isofrac.csv").write_text(ISOFRAC)
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(tmp_path / "isofrac.csv")
    # the numbers scaled exactly (their own fraction kept to the millisecond), the dates to the millisecond
    assert df["timestamp"].tolist() == [1_714_500_000_000, 1_714_510_000_250, 1_714_521_600_100, 1_714_521_600_900]
    assert detect_unit(df["timestamp"].to_numpy()) == "ms" and not caplog.records
    split = leave_last_n_out(df, n=1)
    assert split.valid["item_id"].tolist() == ["b_early"] and split.test["item_id"].tolist() == ["a_late"]
    # a declared unit is the whole column's, as before: floored to seconds, as asked
    told = read_interactions(tmp_path / "isofrac.csv", time_unit="s")
    assert told["timestamp"].tolist()[2:] == [1_714_521_600, 1_714_521_600]


def test_a_tenth_of_a_second_moved_to_milliseconds_is_not_said_to_be_floored(tmp_path, caplog):
    # 891717742.7 s is 891717742700.0000477 ms in binary: written exactly as 891717742700, yet warned about as
    # "1 timestamps ... floored to whole milliseconds" (with .5, exact in binary, nothing was said)
    (tmp_path / "fr.csv").write_text("user_id,item_id,timestamp\nu,a,891717742.7\nu,b,1998-04-04T19:22:22.200Z\n"
                                     "u,c,891717743\nu,d,891717744.0005\n")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(tmp_path / "fr.csv")
    assert df["timestamp"].tolist() == [891_717_742_700, 891_717_742_200, 891_717_743_000, 891_717_744_000]
    # the half millisecond is floored, and said: only it
    assert "1 timestamps in column 'timestamp' have a fractional part" in caplog.text


def test_dates_floored_beside_numbers_that_cannot_move_are_warned_about(tmp_path, caplog):
    # epoch seconds of 1971 taken as milliseconds would read as seconds again (their size): they stay seconds, and
    # the dates' milliseconds are floored -- with a warning, not in silence
    (tmp_path / "early.csv").write_text("user_id,item_id,timestamp\nu1,x,50000000\nu1,b,2024-05-01T00:00:00.100Z\n")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(tmp_path / "early.csv")
    assert df["timestamp"].tolist() == [50_000_000, 1_714_521_600]
    assert "1 dates in column 'timestamp' have parts finer than the whole seconds" in caplog.text


def test_iso_times_with_milliseconds_beside_a_file_of_epoch_seconds_go_on_milliseconds(tmp_path):
    # was refused: "data.valid valid.csv: epoch milliseconds, told from their size" of a file of ISO dates
    (tmp_path / "train.csv").write_text("user_id,item_id,timestamp\nu1,a,1714500000\nu1,b,1714500100\n"
                                        "u2,a,1714500000\nu2,c,1714500100\n")
    (tmp_path / "valid.csv").write_text("user_id,item_id,timestamp\nu1,c,2024-05-01T00:00:00.250Z\n"
                                        "u2,b,2024-05-01T00:00:00.500Z\n")
    src = load_sources(DataConfig(train=str(tmp_path / "train.csv"), valid=str(tmp_path / "valid.csv")))
    assert src.train["timestamp"].tolist() == [1_714_500_000_000, 1_714_500_100_000] * 2
    assert src.valid["timestamp"].tolist() == [1_714_521_600_250, 1_714_521_600_500]
    # whole-second dates beside epoch milliseconds join them (as in one column), where they were refused too
    (tmp_path / "ms.csv").write_text("user_id,item_id,timestamp\nu1,a,1714500000000\nu2,c,1714500100000\n")
    (tmp_path / "days.csv").write_text("user_id,item_id,timestamp\nu1,c,2024-05-01\n")
    src = load_sources(DataConfig(train=str(tmp_path / "ms.csv"), valid=str(tmp_path / "days.csv")))
    assert src.valid["timestamp"].tolist() == [1_714_521_600_000]


def test_train_in_seconds_beside_valid_in_milliseconds_is_refused_naming_both(tmp_path):
    (tmp_path / "train.csv").write_text("user_id,item_id,timestamp\nu1,a,1700000000\nu1,b,1700000060\n")
    (tmp_path / "valid.csv").write_text("user_id,item_id,timestamp\nu1,c,1700000120000\n")
    with pytest.raises(DataError) as e:
        load_sources(DataConfig(train=str(tmp_path / "train.csv"), valid=str(tmp_path / "valid.csv")))
    assert "train.csv: epoch seconds" in str(e.value) and "valid.csv: epoch milliseconds" in str(e.value)
    # a declared unit is every file's unit: read as given
    src = load_sources(DataConfig(train=str(tmp_path / "train.csv"), valid=str(tmp_path / "valid.csv"),
                                  time_unit="s"))
    assert src.valid["timestamp"].tolist() == [1_700_000_120_000]


def test_a_time_cut_of_a_sasrec_file_says_its_timestamps_are_each_users_line_numbers(tmp_path, caplog):
    # Before: the messages said "positions in file order", so a user cut at a line of the file (which no
    # timestamp reaches: they are each user's line numbers) and got empty valid and test parts
    p = tmp_path / "seq.txt"
    p.write_text("1 1\n1 2\n1 3\n1 4\n2 2\n2 3\n2 5\n", encoding="utf-8")
    df = read_interactions(p)
    with caplog.at_level("WARNING"):
        s = global_time_split(df, 5, 6)
    assert len(s.valid) == len(s.test) == 0
    assert "each user's line numbers (0 to 3; SASRec format)" in caplog.text and "--method leave_last" in caplog.text
    assert "file order" not in caplog.text
    with pytest.raises(ConfigError, match="each user's line numbers"):
        global_time_split(df, "2024-05-01", "2024-06-01")


# --- one column, two units: rows of a second export in milliseconds among epoch seconds -----------------------------

def test_numbers_of_another_unit_in_one_column_are_refused_naming_the_row(tmp_path):
    # before: the column's unit came from its median and the millisecond rows were taken as seconds (the year
    # ~56,000), so each user's oldest events became their newest and a temporal split held them out as test
    p = tmp_path / "mixed.csv"
    rows = [f"u{k % 3},i{k},{(APRIL + k * DAY) * (1000 if k in (4, 7) else 1)}" for k in range(12)]
    p.write_text("user_id,item_id,timestamp\n" + "\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"row 6, column 'timestamp'.*epoch milliseconds.*epoch seconds.*"
                       r"data.time_unit.*holds for row 9$"):
        read_interactions(p)
    # declared, the unit is the user's word: every number is taken in it, as before
    assert read_interactions(p, time_unit="s")["timestamp"].max() == (APRIL + 7 * DAY) * 1000


def test_zeros_and_dates_beside_numbers_of_one_unit_are_not_a_second_unit():
    ts = [0, APRIL * 1000, APRIL * 1000 + 1, "2024-04-02", APRIL * 1000 + 3]
    df = read_interactions(pd.DataFrame({"user_id": "u", "item_id": list("abcde"), "timestamp": ts}))
    assert df["timestamp"].tolist() == [0, APRIL * 1000, APRIL * 1000 + 1, (APRIL + DAY) * 1000, APRIL * 1000 + 3]


@pytest.mark.parametrize(("value", "unit"), [(0, 1), (19980301, 1), (0, 1000)])
def test_placeholder_times_before_1973_among_later_data_are_warned_with_their_row(tmp_path, caplog, value, unit):
    # a 0 for "unknown", or a date written as the number 19980301, was read as a time of 1970 without a word:
    # each such row became its user's oldest event
    p = tmp_path / "e.csv"
    rows = [f"u{k % 2},i{k},{value if k == 3 else (APRIL + k * DAY) * unit}" for k in range(10)]
    p.write_text("user_id,item_id,timestamp\n" + "\n".join(rows) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        df = read_interactions(p)
    assert df["timestamp"].tolist()[3] == value  # read as written: a warning, not a refusal
    assert f"1 timestamp(s) in column 'timestamp' are before 1973 (e.g. row 5: {value}" in caplog.text


def test_data_of_1971_alone_is_no_placeholder(caplog):
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        early_frame()
    assert "before 1973" not in caplog.text


def test_times_rounded_by_a_narrow_float_column_are_warned_about(tmp_path, caplog):
    # a Parquet column downcast to float32 holds epoch seconds of 1997 in steps of 64 s: the two events 10 s apart
    # below came as one time, and were put in item-id order ("b" last) without a word
    df = pd.DataFrame({"user_id": ["u", "u"], "item_id": ["b", "a"], "timestamp": [874965478, 874965488]})
    f = tmp_path / "t.parquet"
    df.assign(timestamp=df["timestamp"].astype("float32")).to_parquet(f)
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        got = read_interactions(f)
    assert got["timestamp"].nunique() == 1  # what reached us: one time
    assert (f"file {f}, record 1, column 'timestamp': timestamps are float32, which holds whole numbers exactly only "
            "up to 2**24; these times (e.g. 874965504.0) came rounded to steps of up to 64 seconds") in caplog.text
    assert "(2 such times); store times as int64 or datetimes" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        read_interactions(df.assign(timestamp=df["timestamp"].astype("float64") * 1000))  # ms in float64: exact
        read_interactions(df.assign(timestamp=pd.Series([1000, 2000], dtype="float32")))  # below 2**24: exact
    assert "holds whole numbers exactly" not in caplog.text


def test_a_time_before_the_year_1_is_refused_as_a_mixed_unit_not_a_crash(tmp_path):
    """-62135596800000008 is a time beyond Python's years 1-9999 that pandas holds, and strftime refused it:
    NotImplementedError where the unit-mix error shows the date (found by test_fuzz_readers)."""
    path = tmp_path / "i.csv"
    path.write_text("user_id,item_id,timestamp\nu,i,0\nu,i,0\nu,i,-62135596800000008.0\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"row 4, column 'timestamp': timestamp -6.213559680000001e\+16 has the size "
                                        r"of epoch microseconds \(-62135596800000008 in them\)"):
        read_interactions(path)
