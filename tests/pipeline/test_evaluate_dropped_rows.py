"""`twotower evaluate` on a run whose own test split names items never seen in training says that its figures
leave those pairs out.

The split files are read quietly ("told at training"), so a run trained without an item table on ML-100K's
temporal split (48 of 9,596 test rows name 41 items that never occur in train) printed a table averaged over
the other 9,548 pairs, and the line "users: all 943 held-out users evaluated", without a word about the 48.
"""
from __future__ import annotations

import json
import logging

import pandas as pd

from twotower.config import load_config
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.evaluate_run import evaluate_run
from twotower.pipeline.run import train_run


def test_held_out_pairs_outside_the_vocabularies_are_warned_about(tmp_path, caplog):
    rows = [(f"u{u}", f"i{(u + t) % 20}", t) for u in range(13) for t in range(8)]  # u12 reads i12..i19
    train = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])
    valid = pd.DataFrame([(f"u{u}", f"i{(u + 8) % 20}", 8) for u in range(12)], columns=train.columns)
    # u0 and u1 also read "new", an item no training row names
    test = pd.DataFrame([(f"u{u}", f"i{(u + 9) % 20}", 9) for u in range(12)] + [("u0", "new", 10), ("u1", "new", 10)],
                        columns=train.columns)
    paths = {}
    for name, df in (("train", train), ("valid", valid), ("test", test)):
        paths[name] = tmp_path / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    overrides = [f"data.{name}={json.dumps(str(p))}" for name, p in paths.items()] + [
        "data.rating_col=null", "train.epochs=1", "train.progress=false", "train.batch_size=32", "train.threads=1",
        "train.checkpoint=false", "model.user.out_dim=8", "model.user.hidden=[]", "model.item.out_dim=8",
        "model.item.hidden=[]", "eval.baselines=[]"]
    train_run(load_config(overrides=overrides), tmp_path / "run")
    run = TrainedRun.load(tmp_path / "run")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="twotower"):
        rows = evaluate_run(run, ks=(5,))
    assert rows[0]["users_evaluated"] == 12  # u0 and u1 are scored on their known test item only
    assert ("2 of 14 test rows name a user or item unknown to the run (0 users, 1 item outside its "
            "vocabularies): those pairs are left out of every figure, not counted as misses") in caplog.text


def test_the_runs_own_test_split_counts_the_rows_and_repeats_of_the_file_given(tmp_path, caplog):
    """held_out_rows is the file's rows read, repeats included (README): scoring the run's own test split counted
    its copy in the run folder, whose repeats training had dropped, so the file given as --test at training (10 rows,
    2 repeating an earlier row) said held_out_rows 8 and no duplicates, where evaluate --test of it says 10 and 2."""
    rows = [(f"u{u}", f"i{(u + t) % 20}", t, 1.0) for u in range(13) for t in range(8)]
    train = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp", "rating"])
    valid = pd.DataFrame([(f"u{u}", f"i{(u + 8) % 20}", 8, 1.0) for u in range(12)], columns=train.columns)
    test = pd.DataFrame([(f"u{u}", f"i{(u + 9) % 20}", 9, 1.0) for u in range(5)] + [("u0", "new", 10, 1.0)],
                        columns=train.columns)
    test = pd.concat([test, test.iloc[[1]], test.iloc[[2]].assign(rating=2.0)], ignore_index=True)  # exact, rating
    # two clicks apart by a fraction of a second: both kept, though the copy writes them with one floored time
    test = pd.concat([test, pd.DataFrame([("u3", "i15", 20.25, 1.0), ("u3", "i15", 20.75, 1.0)], columns=test.columns)],
                     ignore_index=True)
    paths = {}
    for name, df in (("train", train), ("valid", valid), ("test", test)):
        paths[name] = tmp_path / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    overrides = [f"data.{name}={json.dumps(str(p))}" for name, p in paths.items()] + [
        "train.epochs=1", "train.progress=false", "train.batch_size=32", "train.threads=1",
        "train.checkpoint=false", "model.user.out_dim=8", "model.user.hidden=[]", "model.item.out_dim=8",
        "model.item.hidden=[]", "eval.baselines=[]"]
    train_run(load_config(overrides=overrides), tmp_path / "run")
    run = TrainedRun.load(tmp_path / "run")
    keys = ("held_out_rows", "held_out_duplicates_dropped", "held_out_conflicting_duplicates_dropped",
            "held_out_rows_dropped", "held_out_pairs")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="twotower"):
        own = evaluate_run(run, ks=(5,))[0]
    assert [own[k] for k in keys] == [10, 1, 1, 1, 6]
    assert "1 of 10 test rows names a user or item unknown to the run" in caplog.text
    given = evaluate_run(run, ks=(5,), test_file=paths["test"])[0]
    assert [given[k] for k in keys] == [own[k] for k in keys]
