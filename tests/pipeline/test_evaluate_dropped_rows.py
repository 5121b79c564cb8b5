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
