"""Files given to a trained run are read with the run's column names (data.user_col ...), or canonically."""
from __future__ import annotations

import pandas as pd
import pytest

from tests.synthetic import make_interactions
from twotower.cli.main import main
from twotower.errors import DataError
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.run_inputs import read_run_interactions

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
        "model.item.out_dim=8", "model.user.history_len=4", "model.user.history_dim=8", "--no-progress"]


@pytest.fixture(scope="module")
def custom(tmp_path_factory):
    """A run trained on files whose columns are uid / iid / ts (mapped with data.*_col)."""
    d = tmp_path_factory.mktemp("custom")
    df = make_interactions(n_users=20, n_items=15, per_user=8)
    df = df.rename(columns={"user_id": "uid", "item_id": "iid", "timestamp": "ts"})
    df = df.sort_values(["uid", "ts"], kind="stable")
    last = df.groupby("uid").cumcount(ascending=False) < 2  # each user's newest 2 rows validate
    df[~last].to_csv(d / "train.csv", index=False)
    df[last].to_csv(d / "valid.csv", index=False)
    assert main(["-q", "train", "--train", str(d / "train.csv"), "--valid", str(d / "valid.csv"), "--out",
                 str(d / "run"), "--epochs", "1", "--no-eval", "data.user_col=uid", "data.item_col=iid",
                 "data.timestamp_col=ts", *FAST]) == 0
    return d, TrainedRun.load(d / "run")


def test_the_runs_own_column_names_and_the_canonical_copy_both_read(custom):
    d, run = custom
    mine = read_run_interactions(run, d / "valid.csv")
    copy = read_run_interactions(run, run.dir / "data" / "valid.csv")  # the run's canonical copy
    assert list(mine.columns[:2]) == ["user_id", "item_id"] and len(mine) == len(copy) > 0
    assert set(zip(mine["user_id"], mine["item_id"])) == set(zip(copy["user_id"], copy["item_id"]))


def test_recommend_exclude_and_history_from_take_the_runs_columns(custom, tmp_path, capsys):
    d, run = custom
    out = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run.dir), "--users", "all", "--k", "5",
                 "--history-from", str(d / "train.csv"), "--exclude", str(d / "train.csv"), str(d / "valid.csv"),
                 "--out", str(out)]) == 0
    recs = pd.read_csv(out, dtype=str)
    seen = pd.concat([pd.read_csv(d / f, dtype=str) for f in ("train.csv", "valid.csv")])
    assert len(recs) > 0
    assert not set(zip(recs["user_id"], recs["item_id"])) & set(zip(seen["uid"], seen["iid"]))


def test_a_file_with_other_columns_names_what_the_run_reads(custom, tmp_path):
    _, run = custom
    bad = tmp_path / "bad.csv"
    bad.write_text("user,item\n1,2\n")
    with pytest.raises(DataError) as e:
        read_run_interactions(run, bad)
    msg = str(e.value)
    assert "bad.csv" in msg and "'uid' (users)" in msg and "config.json" in msg and "Set data." not in msg


def test_a_bad_value_in_a_file_of_the_runs_layout_is_named_after_one_read(custom, tmp_path, monkeypatch):
    # the file has the run's columns (uid / iid / ts), so its bad value is the answer: it was read a second time
    # in the canonical layout (a whole extra read of a large file) only to fail on the missing 'user_id' column
    import twotower.data.readers as readers

    d, run = custom
    df = pd.read_csv(d / "valid.csv", dtype=str)
    df.loc[2, "ts"] = "abc"
    bad = tmp_path / "late.csv"
    df.to_csv(bad, index=False)
    reads: list = []
    real = readers.read_table_numbered
    monkeypatch.setattr(readers, "read_table_numbered", lambda *a, **k: reads.append(a) or real(*a, **k))
    with pytest.raises(DataError) as e:
        read_run_interactions(run, bad)
    assert (e.value.row, e.value.column) == (4, "ts") and "'abc'" in str(e.value)
    assert len(reads) == 1
    # a file in the canonical layout is still read as such
    canonical = read_run_interactions(run, run.dir / "data" / "valid.csv")
    assert len(canonical) == len(df)


def test_a_held_out_files_bad_rating_is_read_as_missing_and_warned_in_its_use(custom, tmp_path, caplog):
    # evaluate --test stopped on a rating it never uses, advising data.rating_col=null, which evaluate refuses (the
    # run's columns are fixed); a rating of -3 was said to "train as positives too" in a file that is held out
    d, run = custom
    df = pd.read_csv(d / "valid.csv", dtype={"uid": str, "iid": str})
    df["rating"] = df["rating"].astype(object)
    df.loc[5, "rating"], df.loc[6, "rating"], df.loc[7, "rating"] = float("nan"), "n/a", -3
    repeat = df.iloc[[5]].assign(rating=2.0)  # repeats row 7 with a rating: counted as conflicting
    same = df.iloc[[6]].assign(rating=float("nan"))  # repeats row 8, both unusable: an exact duplicate
    pd.concat([df, repeat, same]).to_csv(tmp_path / "test.csv", index=False)
    with caplog.at_level("WARNING", logger="twotower.data.readers"):
        assert main(["-q", "evaluate", "--run", str(run.dir), "--test", str(tmp_path / "test.csv"),
                     "--baselines", "popularity"]) == 0
    read = read_run_interactions(run, tmp_path / "test.csv")
    assert len(read) == len(df) and read["rating"].isna().sum() == 2
    rep = read.attrs["report"]
    assert (rep["duplicates_dropped"], rep["conflicting_duplicates_dropped"]) == (1, 1)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "row 7" in said and "read as missing" in said and "held-out relevant pairs" in said
    assert "train as positives" not in said and "data.rating_col" not in said
