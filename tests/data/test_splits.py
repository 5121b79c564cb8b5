from __future__ import annotations

import pandas as pd
import pytest

from twotower.data import (
    global_time_split,
    leave_last_n_out,
    random_split,
    read_interactions,
    split_report,
    temporal_split,
)
from twotower.errors import ConfigError, DataError


def make(rows):
    return read_interactions(pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]))


def test_temporal_split_order_ties_by_numeric_item_id_and_min_one():
    # user a: 4 rows, two tied at t=5 between items "10" and "9" -> numeric order: 9 before 10
    df = make([("a", "10", 5), ("a", "9", 5), ("a", "1", 1), ("a", "2", 2), ("b", "1", 1), ("b", "2", 2)])
    s = temporal_split(df, (0.8, 0.1, 0.1))
    # m=4: floor(0.4)=0 -> at least 1 each
    assert s.test.query("user_id == 'a'")["item_id"].tolist() == ["10"]
    assert s.valid.query("user_id == 'a'")["item_id"].tolist() == ["9"]
    assert s.train.query("user_id == 'a'")["item_id"].tolist() == ["1", "2"]
    # user b has 2 rows < 3: all train, counted
    assert s.train.query("user_id == 'b'").shape[0] == 2
    assert s.report["users_train_only"] == 1
    assert s.report["train_rows"] == 4 and s.report["valid_rows"] == 1 and s.report["test_rows"] == 1


def test_temporal_split_floor_counts():
    df = make([("u", str(i), i) for i in range(20)])
    s = temporal_split(df, (0.7, 0.2, 0.1))
    assert len(s.test) == 2 and len(s.valid) == 4 and len(s.train) == 14
    assert s.test["item_id"].tolist() == ["18", "19"]
    # zero valid ratio: no forced valid row
    s0 = temporal_split(make([("u", str(i), i) for i in range(3)]), (0.9, 0.0, 0.1))
    assert len(s0.valid) == 0 and len(s0.test) == 1


@pytest.mark.parametrize(
    "ratios,needle",
    [((0.5, 0.5), "three"), ((0.8, 0.3, -0.1), "non-negative"), ((0.5, 0.1, 0.1), "sum to 1"),
     ((0.0, 0.5, 0.5), "train"), ("abc", "three")],
)
def test_bad_ratios_name_the_setting(ratios, needle):
    df = make([("u", "a", 1)])
    with pytest.raises(ConfigError, match="ratios") as e:
        temporal_split(df, ratios)
    assert needle in str(e.value)
    with pytest.raises(ConfigError, match="ratios"):
        random_split(df, ratios, seed=0)


def test_leave_last_n_out():
    df = make([("a", str(i), i) for i in range(5)] + [("b", "1", 1), ("b", "2", 2)])
    s = leave_last_n_out(df, n=2)
    assert s.test["item_id"].tolist() == ["3", "4"]
    assert s.valid["item_id"].tolist() == ["1", "2"]
    assert s.report["users_train_only"] == 1  # b has 2 < 5 rows
    assert sorted(s.train["user_id"].tolist()) == ["a", "b", "b"]
    with pytest.raises(ConfigError, match="n"):
        leave_last_n_out(df, n=0)



@pytest.mark.parametrize("n", [2**63 - 1, 10**30])
def test_a_leave_n_larger_than_any_history_keeps_every_row_in_train_and_says_so(n, caplog):
    """data.leave_n=1e30 (or 2**63 - 1) passed the config and then failed the split after the data was read with
    "OverflowError: Python int too large to convert to C long" (a user's row count minus n, in int64); a large n
    within int64 (1000) kept every user's rows in train with a warning, and so does any n now."""
    df = make([("a", str(i), i) for i in range(5)] + [("b", "1", 1), ("b", "2", 2)])
    with caplog.at_level("WARNING", logger="twotower.data.splits"):
        s = leave_last_n_out(df, n)
    assert len(s.train) == 7 and len(s.valid) == 0 and len(s.test) == 0
    assert s.report["n"] == n and s.report["users_train_only"] == 2
    assert f"fewer than the {2 * n + 1} interactions" in caplog.text

def test_global_time_split_counts_cold():
    df = make([("a", "x", 1), ("a", "y", 5), ("b", "z", 6), ("a", "x", 9)])
    s = global_time_split(df, valid_start=5, test_start=8)
    assert s.train["timestamp"].tolist() == [1]
    assert s.valid["timestamp"].tolist() == [5, 6]
    assert s.test["timestamp"].tolist() == [9]
    assert s.report["cold_users_valid"] == 1  # b
    assert s.report["cold_items_valid"] == 2  # y, z
    assert s.report["cold_items_test"] == 0
    assert s.report["users_with_empty_train"] == 1
    with pytest.raises(DataError, match="train part empty"):
        global_time_split(df, valid_start=0, test_start=8)
    with pytest.raises(ConfigError, match="valid_start"):
        global_time_split(df, valid_start=9, test_start=8)
    # dates work too
    s2 = global_time_split(df, "1970-01-01T00:00:05", "1970-01-01T00:00:08")
    assert s2.report["valid_rows"] == 2


def test_random_split_is_seeded():
    df = make([(f"u{i % 7}", str(i), i) for i in range(100)])
    a = random_split(df, (0.8, 0.1, 0.1), seed=3)
    b = random_split(df, (0.8, 0.1, 0.1), seed=3)
    c = random_split(df, (0.8, 0.1, 0.1), seed=4)
    assert a.test.equals(b.test) and a.valid.equals(b.valid)
    assert not a.test.equals(c.test)
    assert (len(a.train), len(a.valid), len(a.test)) == (80, 10, 10)
    assert list(a.train.columns) == list(df.columns)


@pytest.mark.parametrize("seed", [-1, True, 2.5])
def test_a_seed_numpy_cannot_take_is_refused_naming_the_argument(seed):
    # seed=-1 failed inside NumPy with a bare "ValueError: expected non-negative integer"
    df = make([(f"u{i % 7}", str(i), i) for i in range(20)])
    with pytest.raises(ConfigError, match=rf"^seed: must be an integer >= 0, got {seed!r}$"):
        random_split(df, seed=seed)


def test_split_report_direct():
    tr = make([("a", "x", 1)])
    va = make([("b", "x", 2)])
    te = make([("a", "y", 3)])
    rep = split_report(tr, va, te)
    assert rep["cold_users_valid"] == 1 and rep["cold_items_test"] == 1 and rep["users_with_empty_train"] == 1



def test_split_report_counts_every_field_with_ids_as_text():
    # the report counts distinct ids as text ("007" and "7" are two items; an int 7 and "7" one), per part, and the
    # cold ones against train; an empty part counts nothing. Pinned when the counting moved from sets to masks.
    tr = pd.DataFrame({"user_id": ["a", "a", "b", "c"], "item_id": ["007", "7", "x", "x"]})
    va = pd.DataFrame({"user_id": ["b", "d", "d"], "item_id": [7, "y", "y"]})
    te = pd.DataFrame({"user_id": ["e"], "item_id": ["007"]})
    rep = split_report(tr, va, te)
    assert rep == {
        "train_rows": 4, "train_users": 3, "train_items": 3,
        "valid_rows": 3, "valid_users": 2, "valid_items": 2,
        "test_rows": 1, "test_users": 1, "test_items": 1,
        "cold_users_valid": 1, "cold_items_valid": 1,  # d; y
        "cold_users_test": 1, "cold_items_test": 0,  # e
        "users_with_empty_train": 2,  # d, e
    }
    empty = tr.iloc[:0]
    rep = split_report(tr, empty, empty)
    assert (rep["valid_rows"], rep["valid_users"], rep["cold_items_test"], rep["users_with_empty_train"]) == (0, 0, 0, 0)
    assert all(type(v) is int for v in rep.values())

def test_a_split_that_leaves_valid_and_test_empty_says_so_at_split_time(caplog):
    """Before: `data split --method leave_last --n 5` on users with fewer than 11 rows (or temporal on users with
    1-2 rows) wrote header-only valid.csv and test.csv without a word; `train --valid valid.csv` then stopped on
    "no data rows". Now a warning names why (every user is too short) and the setting that changes it."""
    df = make([("a", "1", 1), ("a", "2", 2), ("a", "3", 3), ("b", "1", 1), ("b", "2", 2)])
    with caplog.at_level("WARNING", logger="twotower.data.splits"):
        s = leave_last_n_out(df, 2)
    assert len(s.valid) == 0 and len(s.test) == 0
    assert "valid and test are empty: all 2 users have fewer than the 5 interactions" in caplog.text
    assert "--n, data.leave_n" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.data.splits"):
        temporal_split(make([("a", "1", 1), ("a", "2", 2), ("b", "1", 1)]))
    assert "temporal split: valid and test are empty: all 2 users have fewer than the 3 interactions" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.data.splits"):
        random_split(make([("a", str(i), i) for i in range(5)]), (0.8, 0.1, 0.1), seed=0)
    assert "random split: valid is empty: its share 0.1 of 5 rows is less than one row" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.data.splits"):  # a user long enough: no warning
        leave_last_n_out(df, 1)
        temporal_split(df)
    assert "empty" not in caplog.text


def _time_cut(df):  # at the second and third second, whether the frame holds seconds or datetimes (ns)
    scale = 10**9 if pd.api.types.is_datetime64_any_dtype(df["timestamp"]) else 1
    return global_time_split(df, 2 * scale, 3 * scale, time_unit="ns" if scale > 1 else "auto")


@pytest.mark.parametrize("split", [temporal_split, leave_last_n_out, lambda df: random_split(df, seed=0), _time_cut])
def test_a_frame_the_splits_would_misorder_is_refused_naming_its_row(split):
    # Before: timestamps were cast to int64 without a word: 1.7 s tied with 1.2 s and, ties going by item id,
    # the latest row (item 5 at 1.7) went to train and the earlier ones to valid and test; NaN became the
    # smallest integer; a missing id was split as the user "nan"
    rows = {"user_id": ["a"] * 4, "item_id": ["5", "6", "7", "8"]}
    for ts, pos in (([1.0, 1.2, 1.5, 1.7], 1), ([1, 2, float("nan"), 4], 2), (["2024-01-02", "x", "y", "z"], 0)):
        with pytest.raises(DataError, match="not a whole epoch time") as e:
            split(pd.DataFrame({**rows, "timestamp": ts}))
        assert e.value.row == pos and e.value.unit == "iloc" and e.value.column == "timestamp"
        assert "read_interactions" in str(e.value)
    with pytest.raises(DataError, match="missing") as e:
        split(pd.DataFrame({"user_id": ["a", None, "a", "a"], "item_id": rows["item_id"], "timestamp": [1, 2, 3, 4]}))
    assert e.value.row == 1 and e.value.column == "user_id"
    # whole numbers, pandas' nullable integers and datetimes order as they did
    for ts in ([1.0, 2.0, 3.0, 4.0], pd.array([1, 2, 3, 4], dtype="Int64"), pd.to_datetime([1, 2, 3, 4], unit="s")):
        s = split(pd.DataFrame({**rows, "timestamp": ts}))
        assert len(s.train) + len(s.valid) + len(s.test) == 4


def test_ties_go_by_item_id_as_the_vocabulary_orders_them():
    # Before: ids past int64 made the splits order ties as text ("10000000000000000000" < "9", so "9" was
    # held out as the later item) while the vocabulary, whose rows order the histories' ties, kept them
    # numeric; and "007" and "7" tied, file order deciding, where the vocabulary puts "007" first
    from twotower.data.vocab import sort_ids

    big = "1" + "0" * 19
    for later, first in ((big, "9"), ("7", "007")):
        df = make([("u", "0", 1), ("u", later, 5), ("u", first, 5), ("v", "1", 1)])  # file order: later first
        s = leave_last_n_out(df, 1)
        assert s.test["item_id"].tolist() == [later] and s.valid["item_id"].tolist() == [first]
        assert sort_ids([later, first]) == [first, later]


def test_the_library_splits_default_to_the_config_and_cut_as_the_cli_does(tmp_path):
    # Before: random_split's seed defaulted to 0 while `data split --method random` and `train --data FILE
    # data.split=random` use train.seed (42), so tt.random_split(df) and the CLI cut the same rows two ways
    import inspect

    from twotower.cli.main import main
    from twotower.config import DataConfig, TrainConfig

    params = {f.__name__: inspect.signature(f).parameters for f in (temporal_split, leave_last_n_out, random_split)}
    assert params["random_split"]["seed"].default == TrainConfig.seed
    assert params["random_split"]["ratios"].default == params["temporal_split"]["ratios"].default == DataConfig.ratios
    assert params["leave_last_n_out"]["n"].default == DataConfig.leave_n
    src = tmp_path / "in.csv"
    src.write_text("user_id,item_id,timestamp\n" + "".join(f"u{i % 5},{i},{i}\n" for i in range(60)), encoding="utf-8")
    assert main(["data", "split", "--input", str(src), "--method", "random", "--out", str(tmp_path / "s")]) == 0
    s = random_split(read_interactions(src))
    for name, part in zip(("train", "valid", "test"), s):
        written = read_interactions(tmp_path / "s" / f"{name}.csv")
        assert sorted(written["item_id"]) == sorted(part["item_id"]), name
